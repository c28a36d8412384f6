#pragma once
// `tarmac verify`: proves that a dataset directory is complete and intact. Checks the
// annotation file against docs/format.md, walks every shard as tar (headers, padding,
// end-of-archive), checks every blob's place, name, size and CRC-32 (optionally decodes it),
// and checks the sealed manifest (its own CRC-32, the annotation file's and each shard's).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "check/annotation.h"

namespace tarmac::check {

struct VerifyOptions {
  std::string dir;
  bool decode = false;  ///< also decode every image and dense map and check its size
  int threads = 0;      ///< 0 = all cores; shards are checked in parallel
};

struct VerifyProgress {
  uint64_t bytes_done = 0, bytes_total = 0;
  double seconds = 0;
  bool final = false;
};

struct VerifyReport {
  std::string dir;
  uint64_t samples = 0;
  uint64_t shards = 0;
  uint64_t blobs = 0;             ///< stored blobs checked (images + dense maps)
  uint64_t columns = 0;           ///< derived columns checked (columns/NAME.safetensors)
  uint64_t bytes_checked = 0;     ///< bytes read: annotation file, manifest and shards
  uint64_t problem_count = 0;     ///< all problems found
  std::vector<Problem> problems;  ///< the first kMaxProblems, in a deterministic order
  double seconds = 0;
  bool ok() const { return problem_count == 0; }
};

/// How many problems a report lists (all are counted).
inline constexpr size_t kMaxProblems = 1000;

/// Verifies the dataset in `options.dir`. Never throws for bad data: every finding, missing
/// file or unreadable byte becomes a Problem. `progress` (may be empty) is called from the
/// calling thread about 4 times a second.
VerifyReport verify_dataset(const VerifyOptions& options,
                            const std::function<void(const VerifyProgress&)>& progress);

}  // namespace tarmac::check
