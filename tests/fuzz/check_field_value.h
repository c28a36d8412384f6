#pragma once
// The consistency check every label fuzz target applies to what a parser returns: a value
// whose shape, dtype and bytes disagree would make the writer read past its data.
#include <cstdint>

#include "common/utf8.h"
#include "labels/field_value.h"

namespace tarmac::fuzz {

inline void check_field_value(const FieldValue& v) {
  if (v.null) {  // a field without a value (JSON null): nothing to read
    if (!v.data.empty() || !v.shape.empty()) __builtin_trap();
    return;
  }
  for (int64_t d : v.shape)
    if (d < 0) __builtin_trap();
  if (v.kind == FieldValue::Kind::Numeric) {
    if (static_cast<uint64_t>(v.num_elements()) * dtype_size(v.dtype) != v.data.size())
      __builtin_trap();
  } else if (v.shape.size() != 1 || static_cast<uint64_t>(v.shape[0]) != v.data.size() ||
             !is_valid_utf8(v.data)) {
    __builtin_trap();
  }
}

}  // namespace tarmac::fuzz
