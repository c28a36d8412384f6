#include "write/staging.h"

#include <fstream>

#include "common/crc32.h"
#include "common/error.h"
#include "format/manifest.h"
#include "format/names.h"
#include "write/file_util.h"
#include "write/manifest_file.h"

namespace tarmac {
namespace fs = std::filesystem;
using namespace format;

std::string write_shard_list(const fs::path& staging, const ShardList& list) {
  const std::string text = shard_list_text(list);
  write_file_atomic((staging / kShardListFile).string(), text);
  return crc32_hex(crc32_update(0, text.data(), text.size()));
}

void publish_dataset(const fs::path& out, const fs::path& staging,
                     const std::vector<std::string>& shards,
                     const std::vector<std::string>& replaced) {
  std::error_code ec;
  for (const auto& name : replaced) fs::remove(out / name, ec);
  for (const auto& s : shards) atomic_rename((staging / s).string(), (out / s).string());
  if (fs::exists(staging / kShardListFile, ec))
    atomic_rename((staging / kShardListFile).string(), (out / kShardListFile).string());
  atomic_rename((staging / kManifestFile).string(), (out / kManifestFile).string());
  atomic_rename((staging / kLabelsFile).string(), (out / kLabelsFile).string());
  fs::remove_all(staging, ec);
}

void refuse_foreign_staging(const fs::path& staging) {
  std::error_code ec;
  if (!fs::is_directory(staging, ec)) return;
  for (const auto& e : fs::directory_iterator(staging, ec)) {
    const std::string name = e.path().filename().string();
    if (e.symlink_status(ec).type() == fs::file_type::regular && is_staging_file_name(name))
      continue;
    throw FatalError("'" + staging.string() + "' holds '" + name +
                     "', which no tarmac run writes there: it is not removed, and nor is the "
                     "rest of that folder. Move it out of the folder (or remove the folder "
                     "yourself), then run the command again");
  }
  if (ec) throw FatalError("cannot list '" + staging.string() + "': " + ec.message());
}

void discard_unfinished_publish(const fs::path& out, const fs::path& staging) {
  std::error_code ec;
  if (!fs::is_directory(staging, ec) || fs::exists(out / kLabelsFile, ec)) return;
  refuse_foreign_staging(staging);
  // The manifest goes out after the shards, so while it is still in staging it lists every
  // shard already moved; once it is out, it lists them all.
  const fs::path manifest_dir = fs::exists(staging / kManifestFile, ec) ? staging : out;
  std::vector<std::string> published{kManifestFile, kShardListFile};
  try {
    if (const auto m = format::read_manifest(manifest_dir))
      for (auto& name : manifest_shard_names(*m)) published.push_back(std::move(name));
  } catch (const ParseError&) {  // not one a run wrote: none of its names is acted on
  }
  // Each is moved out of staging by rename: a name still in staging was not published, and
  // the file of that name in `out` is not the run's (a user's, put there since). A manifest in
  // `out` while staging still holds shards was not moved there by the run either.
  bool staged_shards = false;
  for (const auto& e : fs::directory_iterator(staging, ec))
    staged_shards = staged_shards || format::is_shard_name(e.path().filename().string());
  if (fs::exists(staging / kManifestFile, ec) ||
      (fs::exists(out / kManifestFile, ec) && !staged_shards))
    for (const auto& name : published)
      if (!fs::exists(staging / name, ec)) fs::remove(out / name, ec);
  fs::remove_all(staging, ec);
}

}  // namespace tarmac
