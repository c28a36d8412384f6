#pragma once
// CRC-32 as zlib's crc32() computes it (the gzip/PNG/zip polynomial, reflected; chains the
// same way), through ISA-L's folding implementation (PCLMULQDQ, AVX-512 where present): about
// 3x zlib 1.2.13's rate, and every input byte, stored blob and shard byte is summed.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tarmac {

/// The CRC-32 of `size` bytes continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32_of(std::span<const uint8_t> bytes) {
  return crc32_update(0, bytes.data(), bytes.size());
}

/// 8 lower-case hex digits: how the manifest, the column files and verify write a CRC-32.
std::string crc32_hex(uint32_t crc);

/// The CRC-32 of pieces laid end to end, from each piece's own CRC-32 and length, without
/// reading a byte again (zlib's crc32_combine). Pieces of a length seen before cost one
/// carry-less product: the operator for a length is made once (up to 64 lengths are kept).
class Crc32Concat {
 public:
  void append(uint32_t piece_crc, uint64_t piece_size);
  uint32_t value() const { return crc_; }

 private:
  uint32_t crc_ = 0;
  std::vector<std::pair<uint64_t, unsigned long>> ops_;  // length -> zlib's combine operator
};

}  // namespace tarmac
