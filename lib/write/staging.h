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
/// `staging` holds one, the manifest, then the annotation file last, so that its presence means
/// the dataset is complete; then removes the staging directory. `replaced` names the files of
/// the dataset that was in `out` before (convert --overwrite: its annotation file, manifest,
/// shard list and the shards its manifest lists, never a name-pattern match); they are removed
/// first, and nothing else of the directory is touched. Throws FatalError.
void publish_dataset(const std::filesystem::path& out, const std::filesystem::path& staging,
                     const std::vector<std::string>& shards,
                     const std::vector<std::string>& replaced);

/// Throws FatalError, naming the first, when `staging` (an interrupted run's staging directory,
/// about to be removed) holds anything a run does not write there (format::is_staging_file_name:
/// a user's file, a folder, a link): only what tarmac wrote is ever deleted. Nothing when
/// `staging` does not exist.
void refuse_foreign_staging(const std::filesystem::path& staging);

/// A run that died while publishing (its staging directory is there, the annotation file is
/// not): removes the files it had moved into `out`, those its manifest lists (the manifest
/// still in `staging`, or already moved out), then the staging directory (refuse_foreign_staging
/// first: nothing is removed when it holds what a run did not write). Nothing else of
/// `out` is touched. A staging directory holding a checkpoint is converted work: callers keep it.
void discard_unfinished_publish(const std::filesystem::path& out,
                                const std::filesystem::path& staging);

}  // namespace tarmac
