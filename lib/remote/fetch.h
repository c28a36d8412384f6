#pragma once
// Reading whole objects and byte ranges of objects: a shard downloaded into a file (its CRC-32
// computed as the bytes land), a table downloaded into memory, a sample's bytes by one Range
// GET, a small file that may be missing (a dataset's shardlist.json).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "remote/http.h"

namespace tarmac::remote {

struct Downloaded {
  uint64_t size = 0;
  uint32_t crc32 = 0;  ///< of the bytes written
  TransferCounts counts;
};

/// Streams `target` into the file `path` (created or truncated; not removed on failure),
/// retried and resumed as HttpStream is. Throws RemoteError for the object, FatalError naming
/// `path` when it cannot be written.
Downloaded download_to_file(const Target& target, const RemoteConfig& config,
                            const std::string& path, const StopRequest* stop = nullptr);

/// The whole object in memory, retried and resumed as HttpStream is. Throws RemoteError for the
/// object, or as soon as it is known to hold more than `limit` bytes (naming both sizes), or
/// when it holds other than `declared` bytes (its HEAD's size, if known).
std::vector<uint8_t> download_to_memory(const Target& target, const RemoteConfig& config,
                                        uint64_t limit, const StopRequest* stop = nullptr,
                                        std::optional<uint64_t> declared = std::nullopt);

/// Bytes [offset, offset + size) of `target` by one Range GET; RemoteError when the server
/// answers with other bytes or fewer.
std::string get_range(const Target& target, const RemoteConfig& config, uint64_t offset,
                      uint64_t size);

/// The whole object (at most `limit` bytes), or nullopt when the server says there is none
/// (HTTP 404); any other failure throws RemoteError.
std::optional<std::string> get_if_exists(const Target& target, const RemoteConfig& config,
                                         size_t limit = 64 << 20);

}  // namespace tarmac::remote
