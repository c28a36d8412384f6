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
#include "common/stop.h"

namespace tarmac::check {

struct VerifyOptions {
  std::string dir;
  bool decode = false;  ///< also decode every image and dense map and check its size
  int threads = 0;      ///< 0 = all cores; shards are checked in parallel
  /// 0: every sample. N: a spot check of N samples (pick_samples(seed)): their blobs alone, each
  /// read with its tar header, instead of every byte of every shard.
  uint64_t sample = 0;
  uint64_t seed = 0;
  /// Polled between shards and members: a request ends the check with Interrupted (nothing is
  /// known of what was not checked). Null: never.
  const StopRequest* stop = nullptr;
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
  uint64_t sampled = 0;           ///< samples spot-checked (--sample); 0 when all were
  uint64_t bytes_checked = 0;     ///< bytes read: annotation file, manifest and shards
  uint64_t problem_count = 0;     ///< all problems found
  std::vector<Problem> problems;  ///< the first kMaxProblems, in a deterministic order
  double seconds = 0;
  /// A dataset was there to check: its annotation file or its manifest exists. With problems,
  /// the dataset is damaged (the CLI exits 3); without it, there is no dataset (exit 1).
  bool found = false;
  bool ok() const { return problem_count == 0; }
  bool damaged() const { return found && !ok(); }
};

/// How many problems a report lists (all are counted).
inline constexpr size_t kMaxProblems = 1000;

/// `k` distinct sample indices of [0, n), sorted (all of them when k >= n): Floyd's algorithm
/// drawing from std::mt19937_64(seed), so the same n, k and seed give the same samples.
std::vector<uint64_t> pick_samples(uint64_t n, uint64_t k, uint64_t seed);

/// Verifies the dataset in `options.dir`: a folder, or an s3:// or http(s):// prefix (its shards
/// downloaded one by one into TMPDIR, checked, removed). Never throws for bad data: every
/// finding, missing file or unreadable byte becomes a Problem; RemoteError when the server
/// refuses the credentials or does not answer. `progress` (may be empty) is called from the
/// calling thread about 4 times a second.
VerifyReport verify_dataset(const VerifyOptions& options,
                            const std::function<void(const VerifyProgress&)>& progress);

}  // namespace tarmac::check
