#include "read/cached_dataset.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "format/column_file.h"
#include "format/names.h"
#include "remote/url.h"

namespace tarmac {
namespace fs = std::filesystem;
namespace {

// "1a2b3c4d" -> 0x1a2b3c4d; nullopt unless 8 hex digits.
std::optional<uint32_t> parse_crc(const std::string& hex) {
  if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return std::nullopt;
  return static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

RemoteDatasetFiles fetch_dataset_files(remote::ObjectCache& cache, const std::string& url,
                                       bool check_crcs) {
  if (!remote::is_remote(url))
    throw ArgumentError("'" + url + "' is not an s3:// or http(s):// dataset");
  RemoteDatasetFiles f;
  f.url = url.ends_with('/') ? url : url + "/";
  std::string manifest_path;
  try {
    manifest_path = cache.fetch(f.url + format::kManifestFile, std::nullopt);
  } catch (const remote::RemoteError& e) {
    if (e.http_status() != 404) throw;
    throw remote::RemoteError(
        "'" + f.url + "' is not a complete dataset: it has no " + format::kManifestFile +
            " (HTTP 404; a conversion or an upload into it did not finish, or the prefix is "
            "wrong: aws s3 ls " +
            f.url + " lists it)",
        404);
  }
  f.dir = fs::path(manifest_path).parent_path().string();
  try {
    f.manifest = format::parse_manifest(read_text(manifest_path));
  } catch (const ParseError& e) {
    throw ParseError("'" + f.url + format::kManifestFile + "': " + e.what());
  }
  const format::Manifest& m = f.manifest;
  const auto crc = [&](const std::optional<std::string>& hex) {
    return check_crcs && hex ? parse_crc(*hex) : std::nullopt;
  };
  // Without check_crcs (verify), a missing file is left for verify to report.
  const auto get = [&](const std::string& file, std::optional<uint32_t> want) {
    try {
      cache.fetch(f.url + file, want);
    } catch (const remote::RemoteError& e) {
      if (check_crcs || e.http_status() != 404) throw;
    }
  };
  get(format::kLabelsFile, crc(m.labels_crc32));
  if (m.shard_list) get(m.shard_list->name, crc(m.shard_list->crc32));
  if (m.columns)
    for (const auto& entry : *m.columns) get(format::column_file(entry.first), std::nullopt);
  return f;
}

Dataset open_cached(const std::string& url, const std::string& cache_dir, uint64_t cache_size,
                    const remote::RemoteConfig& config) {
  auto cache = std::make_shared<remote::ObjectCache>(cache_dir, cache_size, config);
  RemoteDatasetFiles f = fetch_dataset_files(*cache, url);
  std::vector<std::pair<std::string, std::optional<uint32_t>>> shards;
  if (f.manifest.shards)
    for (const format::ManifestShard& s : *f.manifest.shards)
      shards.emplace_back(f.url + s.name, parse_crc(s.crc32));
  Dataset ds(f.dir, [cache, shards](size_t k) {
    return cache->fetch(shards.at(k).first, shards.at(k).second);
  });
  if (format::manifest_shard_names(f.manifest) != ds.shard_names())
    throw FatalError("'" + f.url + "': " + format::kManifestFile + " and " + format::kLabelsFile +
                     " list different shards: run tarmac verify " + f.url);
  return ds;
}

}  // namespace tarmac
