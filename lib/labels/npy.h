#pragma once
// NumPy .npy arrays (format versions 1.0, 2.0, 3.0), read without ever unpickling.
#include <cstdint>
#include <span>

#include "labels/field_value.h"

namespace tarmac {

/// Returns the array as a Numeric tensor (little-endian, C order); a one-element unicode/bytes
/// array as Kind::String, a larger one as Kind::Json (nested JSON lists of strings).
/// Throws ParseError for malformed files and unsupported dtypes (object, structured, complex, ...).
FieldValue parse_npy(std::span<const uint8_t> bytes);

}  // namespace tarmac
