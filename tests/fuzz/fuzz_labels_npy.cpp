// libFuzzer target: parse_npy on arbitrary bytes must return or throw ParseError, nothing else.
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "labels/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tarmac::parse_npy({data, size});
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
