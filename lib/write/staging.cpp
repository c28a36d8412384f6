#include "write/staging.h"

#include "format/names.h"
#include "write/file_util.h"

namespace tarmac {
namespace fs = std::filesystem;
using namespace format;

void publish_dataset(const fs::path& out, const fs::path& staging,
                     const std::vector<std::string>& shards, bool overwrite) {
  std::error_code ec;
  if (overwrite) {
    fs::remove(out / kLabelsFile, ec);
    fs::remove(out / kManifestFile, ec);
    for (const auto& e : fs::directory_iterator(out, ec))
      if (is_shard_name(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  for (const auto& s : shards) atomic_rename((staging / s).string(), (out / s).string());
  atomic_rename((staging / kManifestFile).string(), (out / kManifestFile).string());
  atomic_rename((staging / kLabelsFile).string(), (out / kLabelsFile).string());
  fs::remove_all(staging, ec);
}

}  // namespace tarmac
