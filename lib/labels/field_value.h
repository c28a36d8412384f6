#pragma once
// One label field of one sample, as parsed from a label member.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "format/field_spec.h"

namespace tarmac {

struct FieldValue {
  /// Numeric: a tensor, dtype + shape + little-endian C-order bytes. String: UTF-8 text, dtype
  /// U8, shape {byte length}. Json: a value that fits no column type, kept as its JSON text.
  using Kind = FieldKind;
  Kind kind = Kind::Numeric;
  DType dtype = DType::F64;
  std::vector<int64_t> shape;  ///< per-sample shape; {} for a scalar
  std::vector<uint8_t> data;   ///< element bytes (Numeric) or UTF-8 bytes (String, Json)
  /// No value (JSON null): the field is named, but this sample has nothing for it.
  bool null = false;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

/// Fields in the order they appear in their source member.
using Fields = std::vector<std::pair<std::string, FieldValue>>;

}  // namespace tarmac
