// libFuzzer target: parse_npz on arbitrary bytes must return or throw ParseError, nothing else.
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "labels/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tarmac::parse_npz({data, size}, "p.", 1 << 20);
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
