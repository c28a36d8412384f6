// libFuzzer target: parse_npz on arbitrary bytes must return consistent values or throw ParseError.
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "labels/npz.h"
#include "labels/utf8.h"

namespace {
// Every value a parser returns must be self-consistent, or the writer would read past its data.
void check(const tarmac::FieldValue& v) {
  for (int64_t d : v.shape)
    if (d < 0) __builtin_trap();
  if (v.kind == tarmac::FieldValue::Kind::Numeric) {
    if (static_cast<uint64_t>(v.num_elements()) * tarmac::dtype_size(v.dtype) != v.data.size())
      __builtin_trap();
  } else if (v.shape.size() != 1 || static_cast<uint64_t>(v.shape[0]) != v.data.size() ||
             !tarmac::is_valid_utf8(v.data)) {
    __builtin_trap();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& [name, value] : tarmac::parse_npz({data, size}, "p.", 1 << 20)) check(value);
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
