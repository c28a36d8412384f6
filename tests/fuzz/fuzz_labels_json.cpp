// libFuzzer target: parse_json_labels on arbitrary bytes must return consistent values or throw
// ParseError.
#include <cstddef>
#include <cstdint>

#include "check_field_value.h"
#include "common/error.h"
#include "labels/json_labels.h"

using tarmac::fuzz::check_field_value;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& [name, value] : tarmac::parse_json_labels({data, size}, "p.", "json"))
      check_field_value(value);
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
