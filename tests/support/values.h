#pragma once
// Helpers the unit tests share: a field's bytes as values or text, a vector's bytes as a span,
// and a checked-in fixture's bytes. One definition each, so that the test executables can
// compile as unity builds (CMakeLists.txt, TARMAC_UNITY).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "labels/field_value.h"

namespace tarmac::test {

/// A field's bytes as the values of type T (a whole number of them, checked).
template <typename T>
std::vector<T> values_of(const FieldValue& v) {
  REQUIRE(v.data.size() % sizeof(T) == 0);
  std::vector<T> out(v.data.size() / sizeof(T));
  std::memcpy(out.data(), v.data.data(), v.data.size());
  return out;
}

/// A field's bytes as text.
inline std::string text_of(const FieldValue& v) {
  return std::string(v.data.begin(), v.data.end());
}

/// The bytes of `v`, writable.
template <class T>
std::span<uint8_t> bytes_of(std::vector<T>& v) {
  return {reinterpret_cast<uint8_t*>(v.data()), v.size() * sizeof(T)};
}

/// The bytes of tests/data/RELATIVE (which must exist).
inline std::vector<uint8_t> read_fixture(const std::string& relative) {
  std::ifstream f(std::string(TARMAC_TEST_DATA) + "/" + relative, std::ios::binary);
  REQUIRE(f.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

}  // namespace tarmac::test
