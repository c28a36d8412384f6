// `tarmac merge`'s run: the parts opened and checked (open_parts.cpp), the output locked and
// staged, shards placed (place_shards.cpp), the annotation file (merged_labels.cpp) and the
// manifest (merged_manifest.cpp) written, then all published at once.
#include "merge/merge.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "common/error.h"
#include "format/names.h"
#include "merge/merge_internal.h"
#include "write/output_lock.h"
#include "write/staging.h"

namespace tarmac {
namespace fs = std::filesystem;
using namespace format;
using namespace merge_detail;

namespace {

// Takes the output directory's lock and gets it ready: a dead merge's leftovers removed, an
// empty staging directory made. Throws FatalError for an output that is a file, locked, or not
// empty, leaving what was there (but a dead merge's leftovers).
std::unique_ptr<OutputLock> lock_output(const MergeOptions& o, const fs::path& out,
                                        const fs::path& staging) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw FatalError("output '" + o.output + "' exists and is not a directory; choose a new one");
  std::string holder;
  for (const auto& a : o.command_line) holder += (holder.empty() ? "" : " ") + a;
  auto lock =
      std::make_unique<OutputLock>(out, holder.empty() ? "tarmac::merge_datasets()" : holder);
  // Under the lock: a staging directory without a checkpoint is a merge that died (never a
  // dataset); an interrupted conversion's is converted work, left alone.
  // One killed while publishing had moved some of its files out: those go too, so that the
  // same command can be run again.
  if (!fs::exists(staging / kCheckpointFile, ec)) discard_unfinished_publish(out, staging);
  if (!empty_but_lock(out))
    throw FatalError("output '" + o.output + "' is not an empty directory; choose a new one");
  fs::create_directories(staging, ec);
  if (ec) throw FatalError("cannot create '" + staging.string() + "': " + ec.message());
  return lock;
}

}  // namespace

MergeResult merge_datasets(const MergeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MergeResult result;
  const PartSet parts = open_mergeable_parts(o, result.warnings);
  const fs::path out(o.output), staging = out / kStagingDir;
  const std::unique_ptr<OutputLock> lock = lock_output(o, out, staging);
  try {
    const PlacedShards placed = place_shards(o, parts, staging, result);
    const auto meta = write_merged_labels(o, parts, placed, staging, result);
    write_merged_manifest(o, parts, placed, meta, staging, result);
    publish_dataset(out, staging, placed.names, /*replaced=*/{});
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace tarmac
