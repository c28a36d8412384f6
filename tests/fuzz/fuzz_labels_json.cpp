// libFuzzer target: parse_json_labels on arbitrary bytes must return or throw ParseError, nothing else.
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "labels/json_labels.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tarmac::parse_json_labels({data, size}, "p.", "json");
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
