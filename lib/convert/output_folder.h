#pragma once
// The output folder's policy: what convert may write over or next to (an old dataset's files
// only, under --overwrite; a --resume's staging directory), and the inputs it must not sit
// over. Everything checked before anything is written or deleted.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "format/checkpoint.h"

namespace tarmac {

/// What prepare_output found in the output directory.
struct PreparedOutput {
  /// The checkpoint to resume from (--resume, when an interrupted run left one).
  std::optional<format::Checkpoint> checkpoint;
  /// --resume found a finished dataset: nothing to do.
  bool complete = false;
  /// The old dataset's files that publishing replaces (--overwrite): its annotation file,
  /// manifest, shard list and the shards its manifest lists.
  std::vector<std::string> replaced;
};

/// What a run may do to what its output directory holds.
struct OutputPolicy {
  bool overwrite = false;  ///< --overwrite: replace an old dataset (its files only)
  bool resume = false;     ///< --resume: go on from an interrupted run's checkpoint
};

/// Gets the output directory ready: with --resume, every file the checkpoint names back in the
/// staging directory. Refuses a directory holding anything but an old dataset's files, unless
/// --overwrite, and even then a file named like a dataset's that no dataset there lists.
/// Throws FatalError.
PreparedOutput prepare_output(OutputPolicy policy, const std::filesystem::path& out,
                              const std::filesystem::path& staging);

/// Refuses (FatalError) an input file or folder (`inputs`: the run's, and --table) inside the
/// output directory `output`: the dataset written there could replace it.
void refuse_inputs_inside_output(const std::vector<std::string>& inputs, const std::string& output);

/// -o s3://: an s3:// input (an object, or a prefix listed; `inputs`: the run's, and --table)
/// inside the output prefix `destination`, or a listed input prefix that holds the output
/// prefix, is refused (FatalError naming both) before anything is listed, written or deleted:
/// the run would read, replace or delete its own input.
void refuse_inputs_inside_remote_output(const std::vector<std::string>& inputs,
                                        const std::string& destination);

}  // namespace tarmac
