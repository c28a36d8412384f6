// libFuzzer target: the restricted unpickler on arbitrary bytes must return a consistent value
// tree or throw ParseError; it never calls anything, so there is nothing else it may do.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/utf8.h"
#include "labels/pickle.h"

namespace {

using tarmac::PickleValue;

size_t item_size(const std::string& descr) {
  if (descr.size() < 3) __builtin_trap();
  if (descr[0] != '<' && descr[0] != '|') __builtin_trap();
  const size_t n = std::stoul(descr.substr(2));
  return descr[1] == 'U' ? 4 * n : n;
}

void check(const PickleValue& v, int depth) {
  if (depth > 70) __builtin_trap();
  using T = PickleValue::Type;
  switch (v.type) {
    case T::Str:
      if (!tarmac::is_valid_utf8(v.text)) __builtin_trap();
      break;
    case T::Dict:
      if (v.keys.size() != v.items.size()) __builtin_trap();
      for (const PickleValue& k : v.keys) check(k, depth + 1);
      break;
    case T::Array: {
      for (int64_t d : v.shape)
        if (d < 0) __builtin_trap();
      const uint64_t n = v.num_elements();
      if (v.text == "|O") {
        if (v.items.size() != n || !v.data.empty()) __builtin_trap();
        break;
      }
      if (!v.items.empty() || v.data.size() != n * item_size(v.text)) __builtin_trap();
      if (v.text == "|b1")
        for (uint8_t b : v.data)
          if (b > 1) __builtin_trap();
      if (v.text[1] == 'U' || v.text[1] == 'S') {
        for (uint64_t i = 0; i < n; ++i) {
          try {
            if (!tarmac::is_valid_utf8(tarmac::pickle_array_string(v, i))) __builtin_trap();
          } catch (const tarmac::ParseError&) {
          }
        }
      }
      break;
    }
    default:
      if (!v.keys.empty()) __builtin_trap();
  }
  for (const PickleValue& item : v.items) check(item, depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check(tarmac::unpickle({data, size}), 0);
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
