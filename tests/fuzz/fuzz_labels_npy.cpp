// libFuzzer target: parse_npy on arbitrary bytes must return consistent values or throw ParseError.
#include <cstddef>
#include <cstdint>

#include "check_field_value.h"
#include "common/error.h"
#include "labels/npy.h"

using tarmac::fuzz::check_field_value;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check_field_value(tarmac::parse_npy({data, size}));
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
