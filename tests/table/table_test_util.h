#pragma once
// Tables written by the tests into a scratch folder, read back with load_table.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "table/table.h"

namespace table_test {

inline std::string write_table(const std::string& name, const std::string& bytes) {
  static const std::filesystem::path dir = [] {
    std::random_device rd;
    auto d = std::filesystem::temp_directory_path() /
             ("tarmac_table_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

inline tarmac::Table load(const std::string& name, const std::string& bytes,
                          tarmac::TableOptions options = {}) {
  return tarmac::load_table(write_table(name, bytes), options);
}

inline const tarmac::TableColumn& column(const tarmac::Table& t, const std::string& name) {
  for (const auto& c : t.columns)
    if (c.name == name) return c;
  FAIL("no column " << name);
  throw 0;
}

inline std::vector<std::string> column_names(const tarmac::Table& t) {
  std::vector<std::string> out;
  for (const auto& c : t.columns) out.push_back(c.name);
  return out;
}

inline std::string text_of(const tarmac::FieldValue& v) {
  return std::string(v.data.begin(), v.data.end());
}

template <typename T>
std::vector<T> values_of(const tarmac::FieldValue& v) {
  REQUIRE(v.data.size() % sizeof(T) == 0);
  std::vector<T> out(v.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data.data(), v.data.size());
  return out;
}

}  // namespace table_test
