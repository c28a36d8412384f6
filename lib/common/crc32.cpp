#include "common/crc32.h"

#include <cstdio>

#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>

namespace tarmac {

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  if (size == 0) return crc;
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), size);
}

void Crc32Concat::append(uint32_t piece_crc, uint64_t piece_size) {
  if (piece_size == 0) return;
  auto it =
      std::find_if(ops_.begin(), ops_.end(), [&](const auto& o) { return o.first == piece_size; });
  if (it == ops_.end()) {
    const unsigned long op = crc32_combine_gen64(static_cast<z_off64_t>(piece_size));
    if (ops_.size() < 64) ops_.emplace_back(piece_size, op);
    crc_ = static_cast<uint32_t>(crc32_combine_op(crc_, piece_crc, op));
    return;
  }
  crc_ = static_cast<uint32_t>(crc32_combine_op(crc_, piece_crc, it->second));
}

std::string crc32_hex(uint32_t crc) {
  char b[16];
  std::snprintf(b, sizeof b, "%08x", crc);
  return b;
}

}  // namespace tarmac
