#include "common/crc32.h"

#include <isa-l/crc.h>

namespace tarmac {

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  if (size == 0) return crc;
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), size);
}

}  // namespace tarmac
