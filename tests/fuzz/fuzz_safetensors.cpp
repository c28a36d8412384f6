// libFuzzer target for parse_safetensors: any input must either parse or throw ParseError.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tarmac::SafetensorsHeader h =
        tarmac::parse_safetensors(std::span<const uint8_t>(data, size));
    for (const tarmac::TensorInfo& t : h.tensors)
      if (t.begin > t.end || t.end > size || h.find(t.name) == nullptr) __builtin_trap();
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
