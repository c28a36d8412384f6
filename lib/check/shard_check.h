#pragma once
// Checks one image shard against the blobs the annotation file places in it: the shard is
// walked as a tar stream (every header's checksum and fields, pax records, zero padding, the
// end-of-archive blocks), and each blob must be exactly the data of one regular member named
// KEY.EXT, with the stored CRC-32. Reads the file by memory map, never whole into memory.
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "check/annotation.h"
#include "common/stop.h"

namespace tarmac::check {

/// One blob expected in a shard, packed in 8 bytes: sample * blob_kinds().size() + kind.
using BlobEntry = uint64_t;

struct ShardCheck {
  uint32_t crc32 = 0;       ///< CRC-32 of the whole file (valid when walked is true)
  bool walked = false;      ///< the file could be read
  uint64_t size = 0;        ///< bytes on disk
  uint64_t blob_bytes = 0;  ///< bytes of blobs found and checked
  std::vector<Problem> problems;
};

/// Checks shard `shard` of `a`, whose expected blobs are `entries` sorted by offset.
/// With `decode`, also decodes each blob and compares its size with width/height.
/// Adds the bytes it has read to `progress`.
ShardCheck check_shard(const Annotation& a, uint32_t shard, const std::vector<BlobEntry>& entries,
                       bool decode, std::atomic<uint64_t>& progress,
                       const StopRequest* stop = nullptr);

/// Checks one blob of shard `shard` from `bytes`, the shard's bytes [offset - 512, offset +
/// size): the ustar header before the data (checksum, magic, a regular file of the blob's size
/// named KEY.EXT), the stored CRC-32 and, with `decode`, the decoded size. `verify --sample`:
/// a spot check that reads these bytes alone, not the shard's other members or its end.
std::vector<Problem> check_blob(const Annotation& a, uint32_t shard, BlobEntry e,
                                std::span<const uint8_t> bytes, bool decode);

}  // namespace tarmac::check
