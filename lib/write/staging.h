#pragma once
// Publishing a dataset from its staging directory (format::kStagingDir) into place, shared by
// convert and merge.
#include <filesystem>
#include <string>
#include <vector>

namespace tarmac {

/// Moves the finished dataset from `staging` into `out`: the shards, the manifest, then the
/// annotation file last, so that its presence means the dataset is complete; then removes the
/// staging directory. With `overwrite`, the dataset files already in `out` (annotation file,
/// manifest, files named as shards are: format::is_shard_name) are removed first; nothing else
/// of the directory is touched. Throws FatalError.
void publish_dataset(const std::filesystem::path& out, const std::filesystem::path& staging,
                     const std::vector<std::string>& shards, bool overwrite);

}  // namespace tarmac
