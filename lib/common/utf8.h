#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tarmac {

/// True when the bytes are well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool is_valid_utf8(std::span<const uint8_t> bytes);
/// Appends code point `cp` (at most 0x10FFFF; the caller checks) as UTF-8.
void append_utf8(std::string& out, uint32_t cp);
inline bool is_valid_utf8(std::string_view s) {
  return is_valid_utf8({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

}  // namespace tarmac
