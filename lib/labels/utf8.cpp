#include "labels/utf8.h"

namespace tarmac {

// Table 3-7 of the Unicode standard: the second byte's range depends on the lead byte,
// which is what rules out overlong forms, surrogates and code points past U+10FFFF.
bool is_valid_utf8(std::span<const uint8_t> bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const uint8_t b = bytes[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (n - i < len) return false;
    if (bytes[i + 1] < lo || bytes[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k)
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

}  // namespace tarmac
