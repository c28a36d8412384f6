#pragma once
// Plain-text label members: free text (.txt) and a class index (.cls).
#include <cstdint>
#include <span>

#include "labels/field_value.h"

namespace tarmac {

/// Returns the text as a Kind::String value, byte-exact except for a leading UTF-8 BOM.
/// Throws ParseError if the bytes are not valid UTF-8.
FieldValue parse_txt(std::span<const uint8_t> bytes);

/// Returns an I64 scalar from one ASCII decimal integer with optional sign and surrounding
/// whitespace. Throws ParseError for anything else (empty, not an integer, out of the int64 range).
FieldValue parse_cls(std::span<const uint8_t> bytes);

}  // namespace tarmac
