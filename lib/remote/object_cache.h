#pragma once
// A folder of downloaded objects shared by processes: each object is fetched whole on first
// use, checked against the CRC-32 its dataset records as it lands, written under a temporary
// name and renamed, and the least recently used objects are removed beyond a size. A lock file
// per object makes processes that want the same object download it once; none of them ever
// sees a half-written file. The reader's cache of s3:// shards (docs/reader.md).
#include <cstdint>
#include <optional>
#include <string>

#include "remote/remote_config.h"

namespace tarmac::remote {

class ObjectCache {
 public:
  /// A cache in `dir` (created) keeping at most `max_bytes` of objects (0: no limit).
  ObjectCache(std::string dir, uint64_t max_bytes, RemoteConfig config);

  /// The local path of object `url`: the cached copy when its CRC-32 is `crc32`, else
  /// downloaded again (a copy whose CRC-32 no longer matches included). Without `crc32` the
  /// object is downloaded at every call (small files that may change: a manifest).
  /// Evicts least recently used objects beyond the size (never the one returned). Throws
  /// RemoteError when it cannot be read or does not have the CRC-32, FatalError for the disk.
  std::string fetch(const std::string& url, std::optional<uint32_t> crc32);

  /// Where `url` is kept: DIR/BUCKET/KEY for s3://, DIR/HOST/PATH for http(s)://. Throws
  /// ParseError for a name with an empty, "." or ".." component.
  std::string local_path(const std::string& url) const;

  const std::string& dir() const { return dir_; }
  const RemoteConfig& config() const { return config_; }

  /// Removes least recently used objects (by modification time, which fetch() renews) until
  /// the cache holds at most max_bytes, keeping `keep`. Other processes' downloads in flight
  /// (temporary files) are neither counted nor removed.
  void evict(const std::string& keep);

 private:
  std::string dir_;
  uint64_t max_bytes_;
  RemoteConfig config_;
};

/// The CRC-32 of a whole file; nullopt when it cannot be read.
std::optional<uint32_t> file_crc32(const std::string& path);

}  // namespace tarmac::remote
