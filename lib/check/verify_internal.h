#pragma once
// verify_dataset's stages: plan (what there is to check: the dataset's files, its annotation
// file and manifest, each shard's blobs; verify_plan.cpp), run (the shards' checks, on
// parallel_for) and reconcile (what the shards hold against the manifest and the shard list,
// then the columns; verify.cpp).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "check/annotation.h"
#include "check/dataset_source.h"
#include "check/shard_check.h"
#include "check/verify.h"
#include "format/manifest.h"

namespace tarmac::check::detail {

/// What verify reads and checks, found before any shard is read.
struct VerifyPlan {
  std::optional<DatasetSource> src;
  std::filesystem::path dir;  ///< the local folder of the dataset's files
  Annotation a;
  format::Manifest m;
  bool have_manifest = false;  ///< m was read (its problems are reported)
  std::string labels_crc;      ///< of the annotation file, 8 hex digits
  /// The blobs to check, by shard, sorted by offset (with --sample: the chosen samples' alone).
  std::vector<std::vector<BlobEntry>> per_shard;
  std::vector<uint64_t> samples;      ///< by shard: the samples whose image it holds (all)
  std::vector<uint64_t> shard_sizes;  ///< as the disk says (a remote shard: the manifest)
  bool sampled = false;               ///< verify --sample checks the chosen blobs alone
  uint64_t bytes_total = 0;           ///< what the shards' and the columns' checks read
};

/// Plans the check of `o.dir`: fills `plan`, the report's dir, found and counts, and appends
/// the problems found on the way. False when nothing more can be checked (no dataset, or an
/// annotation file that cannot be used). Throws RemoteError as verify_dataset.
bool plan_verify(const VerifyOptions& o, VerifyPlan& plan, VerifyReport& r,
                 std::vector<Problem>& problems);

/// Appends "WHAT: the manifest says SAYS, the dataset has FOUND" (file manifest.json).
void mismatch(std::vector<Problem>& problems, const std::string& what, const std::string& says,
              const std::string& found);

/// The number, or "nothing".
std::string opt_text(std::optional<uint64_t> v);

}  // namespace tarmac::check::detail
