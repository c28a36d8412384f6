#include "write/staging.h"

#include "common/crc32.h"
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
                     const std::vector<std::string>& shards, bool overwrite) {
  std::error_code ec;
  if (overwrite) {
    fs::remove(out / kLabelsFile, ec);
    fs::remove(out / kManifestFile, ec);
    fs::remove(out / kShardListFile, ec);
    for (const auto& e : fs::directory_iterator(out, ec))
      if (is_shard_name(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  for (const auto& s : shards) atomic_rename((staging / s).string(), (out / s).string());
  if (fs::exists(staging / kShardListFile, ec))
    atomic_rename((staging / kShardListFile).string(), (out / kShardListFile).string());
  atomic_rename((staging / kManifestFile).string(), (out / kManifestFile).string());
  atomic_rename((staging / kLabelsFile).string(), (out / kLabelsFile).string());
  fs::remove_all(staging, ec);
}

}  // namespace tarmac
