#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace tarmac {

/// True when the bytes are well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool is_valid_utf8(std::span<const uint8_t> bytes);
inline bool is_valid_utf8(std::string_view s) {
  return is_valid_utf8({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

}  // namespace tarmac
