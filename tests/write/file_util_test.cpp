#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "test_util.h"
#include "write/file_util.h"

using tarmac::FatalError;
using tarmac::OutputFile;
using tarmac::test::read_all;
using tarmac::test::TempDir;

namespace {
std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
}  // namespace

TEST_CASE("OutputFile writes, tracks its position and truncates on open") {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  {
    OutputFile f(path);
    f.write_all(bytes_of("hello world, long old content"));
    f.close();
  }
  OutputFile f(path);
  CHECK(f.position() == 0);
  f.write_all(bytes_of("abc"));
  f.write_all(bytes_of(""));
  f.write_all(bytes_of("de"));
  CHECK(f.position() == 5);
  f.sync();
  f.close();
  f.close();  // a second close is a no-op
  const auto got = read_all(path);
  CHECK(std::string(got.begin(), got.end()) == "abcde");
  using P = std::filesystem::perms;
  // Created 0644 (less the umask): never executable, never writable by others.
  CHECK((std::filesystem::status(path).permissions() &
         (P::owner_exec | P::group_write | P::group_exec | P::others_write | P::others_exec)) ==
        P::none);
}

TEST_CASE("OutputFile open failure names the path and the reason") {
  TempDir dir;
  const std::string path = dir.file("missing/out.bin");
  try {
    OutputFile f(path);
    FAIL("expected FatalError");
  } catch (const FatalError& e) {
    CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("No such file or directory"));
  }
}

TEST_CASE("OutputFile reports a full disk with the byte count") {
  OutputFile f("/dev/full");
  const std::vector<uint8_t> data(1234, 7);
  try {
    f.write_all(data);
    FAIL("expected FatalError");
  } catch (const FatalError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/dev/full") &&
                             Catch::Contains("no space left on device") &&
                             Catch::Contains("1234 bytes"));
  }
}

// Issue #25, 16b: NFS, FUSE and some file systems report a full disk as EIO (often only at
// fsync or close), and a user's quota as EDQUOT: both said "Input/output error" or "Disk quota
// exceeded" without saying that the disk is full.
TEST_CASE("an I/O error on a full file system says no space left on device") {
  using tarmac::io_error_reason;
  CHECK(io_error_reason(ENOSPC) == "no space left on device");
  CHECK_THAT(io_error_reason(EDQUOT), Catch::StartsWith("no space left on device"));
  CHECK_THAT(io_error_reason(EIO, 0), Catch::StartsWith("no space left on device"));
  CHECK_THAT(io_error_reason(EIO, 4096), Catch::Contains("4096 bytes free"));
  // EIO with room to spare, or unknown room, is what it says.
  CHECK(io_error_reason(EIO, uint64_t{1} << 30) == std::strerror(EIO));
  CHECK(io_error_reason(EIO) == std::strerror(EIO));
  CHECK(io_error_reason(EACCES, 0) == std::strerror(EACCES));
}

TEST_CASE("write_file_atomic replaces the file and leaves no temp file") {
  TempDir dir;
  const std::string path = dir.file("manifest.json");
  tarmac::write_file_atomic(path, "first");
  tarmac::write_file_atomic(path, "second");
  const auto got = read_all(path);
  CHECK(std::string(got.begin(), got.end()) == "second");
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("write_file_atomic into a missing directory throws FatalError") {
  TempDir dir;
  CHECK_THROWS_AS(tarmac::write_file_atomic(dir.file("no/such/file"), "x"), FatalError);
}

TEST_CASE("atomic_rename moves a file and reports failures") {
  TempDir dir;
  tarmac::write_file_atomic(dir.file("a"), "payload");
  tarmac::atomic_rename(dir.file("a"), dir.file("b"));
  CHECK_FALSE(std::filesystem::exists(dir.file("a")));
  const auto got = read_all(dir.file("b"));
  CHECK(std::string(got.begin(), got.end()) == "payload");
  try {
    tarmac::atomic_rename(dir.file("a"), dir.file("c"));
    FAIL("expected FatalError");
  } catch (const FatalError& e) {
    CHECK_THAT(e.what(), Catch::Contains(dir.file("a")) && Catch::Contains("No such file"));
  }
}
