// libFuzzer target for the annotation file's format: the safetensors container
// (parse_safetensors) and tarmac's layout on top of it (read_layout). Any input must parse or
// throw ParseError, and the two modes of read_layout must agree: the throwing one throws
// exactly when the collecting one reports a problem.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/layout.h"
#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tarmac::SafetensorsHeader h;
  try {
    h = tarmac::parse_safetensors(std::span<const uint8_t>(data, size));
  } catch (const tarmac::ParseError&) {
    return 0;
  }
  for (const tarmac::TensorInfo& t : h.tensors)
    if (t.begin > t.end || t.end > size || h.find(t.name) == nullptr) __builtin_trap();

  std::vector<std::string> problems;
  const auto collected = tarmac::read_layout(h, problems);
  if (!collected && problems.empty()) __builtin_trap();  // unusable, but nobody said why
  bool threw = false;
  try {
    const tarmac::DatasetLayout l = tarmac::read_layout(h);
    // What the throwing mode accepts, every later access may trust.
    const auto n = static_cast<int64_t>(l.num_samples);
    if (!l.key_values || !l.key_offsets || l.key_offsets->shape.at(0) != n + 1) __builtin_trap();
    for (const auto& b : l.blobs)
      for (const tarmac::TensorInfo* t : b.columns)
        if (!t || t->shape.size() != 1 || t->shape[0] != n) __builtin_trap();
    if (l.has_images() && (!l.affine || l.affine->shape.size() != 3)) __builtin_trap();
    for (const auto& f : l.fields) {
      if (!f.values || (f.spec.ragged != (f.offsets != nullptr))) __builtin_trap();
      if (!f.spec.ragged && f.values->shape.at(0) != n) __builtin_trap();
    }
  } catch (const tarmac::ParseError&) {
    threw = true;
  }
  if (threw != !problems.empty()) __builtin_trap();
  return 0;
}
