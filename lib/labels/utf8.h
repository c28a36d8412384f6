#pragma once
// UTF-8 validation shared by the label parsers.
#include <cstdint>
#include <span>

namespace tarmac {

/// True if `bytes` is well-formed UTF-8 (no overlong forms, surrogates, or code points past
/// U+10FFFF).
bool is_valid_utf8(std::span<const uint8_t> bytes);

}  // namespace tarmac
