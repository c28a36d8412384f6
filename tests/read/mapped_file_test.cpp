#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "read/mapped_file.h"

using tarmac::FatalError;
using tarmac::MappedFile;

namespace {
std::string temp_dir() {
  std::string tmpl = "/tmp/tarmac_read_test_XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}
}  // namespace

TEST_CASE("MappedFile maps a file's bytes and survives a move") {
  const std::string dir = temp_dir();
  const std::string path = dir + "/f.bin";
  std::ofstream(path, std::ios::binary) << "hello";
  MappedFile a(path);
  REQUIRE(a.bytes().size() == 5);
  CHECK(std::string(a.bytes().begin(), a.bytes().end()) == "hello");
  MappedFile b(std::move(a));
  CHECK(std::string(b.bytes().begin(), b.bytes().end()) == "hello");
  CHECK(b.path() == path);
  MappedFile c;
  c = std::move(b);
  CHECK(c.bytes().size() == 5);
  std::filesystem::remove_all(dir);
}

TEST_CASE("MappedFile maps an empty file as no bytes") {
  const std::string dir = temp_dir();
  const std::string path = dir + "/empty";
  std::ofstream(path, std::ios::binary).flush();
  MappedFile m(path);
  CHECK(m.bytes().empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("MappedFile errors name the path and the reason") {
  const std::string dir = temp_dir();
  CHECK_THROWS_WITH(MappedFile(dir + "/missing"), Catch::Contains(dir + "/missing") &&
                                                      Catch::Contains("No such file or directory"));
  CHECK_THROWS_WITH(MappedFile(dir), Catch::Contains(dir) && Catch::Contains("not a regular file"));
  CHECK_THROWS_AS(MappedFile(dir), FatalError);
  std::filesystem::remove_all(dir);
}
