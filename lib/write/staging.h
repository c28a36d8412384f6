#pragma once
// Publishing a dataset from its staging directory (format::kStagingDir) into place, shared by
// convert and merge.
#include <filesystem>
#include <string>
#include <vector>

#include "format/shard_list.h"

namespace tarmac {

/// Writes `list` as the shard list (format::kShardListFile) into `staging`, for
/// publish_dataset to move into place; returns the CRC-32 of its bytes as 8 hex digits (the
/// manifest's `shard_list` entry). Throws FatalError.
std::string write_shard_list(const std::filesystem::path& staging, const format::ShardList& list);

/// Moves the finished dataset from `staging` into `out`: the shards, the shard list when
/// `staging` holds one, the manifest, then the
/// annotation file last, so that its presence means the dataset is complete; then removes the
/// staging directory. With `overwrite`, the dataset files already in `out` (annotation file,
/// shard list, manifest, files named as shards are: format::is_shard_name) are removed first;
/// nothing else of the directory is touched. Throws FatalError.
void publish_dataset(const std::filesystem::path& out, const std::filesystem::path& staging,
                     const std::vector<std::string>& shards, bool overwrite);

}  // namespace tarmac
