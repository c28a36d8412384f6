#pragma once
// NumPy .npy arrays (format versions 1.0, 2.0, 3.0), read without ever unpickling.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "labels/field_value.h"

namespace tarmac {

/// Returns the array as a Numeric tensor (little-endian, C order); a one-element unicode/bytes
/// array as Kind::String, a larger one as Kind::Json (nested JSON lists of strings).
/// Throws ParseError for malformed files and unsupported dtypes (object, structured, complex, ...).
FieldValue parse_npy(std::span<const uint8_t> bytes);

/// A .npy header: the dtype as written ("<f8", "|O"), the order, the shape (its element count
/// checked not to overflow), and where the data starts.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

/// Parses only the preamble and header; throws ParseError as parse_npy does. The dtype is not
/// checked, so that an object array ("|O") can be handed to the restricted unpickler.
NpyHeader parse_npy_header(std::span<const uint8_t> bytes);

}  // namespace tarmac
