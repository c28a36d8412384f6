#pragma once
// `tarmac merge`: joins datasets converted in parts (`convert --shard I/N`) into one. The
// annotation file is rewritten with the parts' columns concatenated (dtypes promoted and
// fixed/ragged reconciled as convert does); shards are hard-linked (or copied) and renumbered,
// never re-encoded. Output appears atomically, as convert's does.
#include <cstdint>
#include <string>
#include <vector>

#include "common/stop.h"

namespace tarmac {

struct MergeOptions {
  std::vector<std::string> parts;         ///< dataset directories, in the order of the output
  std::string output;                     ///< created; must be empty or absent
  bool copy = false;                      ///< copy shards instead of hard-linking them
  std::vector<std::string> command_line;  ///< for the manifest
  /// Polled between shards (null: never): a request ends the merge with Interrupted, the
  /// output left without a dataset (a merge is cheap to run again).
  const StopRequest* stop = nullptr;
};

struct MergeResult {
  uint64_t samples = 0;
  uint64_t shards = 0;
  uint64_t linked = 0;  ///< shards hard-linked
  uint64_t copied = 0;  ///< shards copied (--copy, or another filesystem)
  uint64_t image_bytes = 0;
  uint64_t annotation_bytes = 0;
  double seconds = 0;
  std::vector<std::string> warnings;  ///< e.g. parts converted with different options
};

/// Merges `options.parts` into `options.output`. Throws UsageError when no part is given;
/// FatalError naming the part(s) and the reason: a part that is not a valid dataset,
/// incompatible schemas or stored blob kinds, a key present in two parts, an I/O failure.
/// Nothing that looks like a dataset is left behind on failure.
MergeResult merge_datasets(const MergeOptions& options);

}  // namespace tarmac
