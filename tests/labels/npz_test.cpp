#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/npz.h"
#include "support/values.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::FieldValue;
using tarmac::ParseError;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kLimit = 1 << 20;

// A version 1.0 .npy of `count` little-endian int64 values 0, 1, 2, ... (or all zeros).
Bytes npy_i64(size_t count, bool zeros = false) {
  std::string header =
      "{'descr': '<i8', 'fortran_order': False, 'shape': (" + std::to_string(count) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(header.size()), 0};
  out.resize(10 + header.size() + 8 * count);
  std::memcpy(out.data() + 10, header.data(), header.size());
  for (size_t i = 0; i < count; ++i) {
    const int64_t v = zeros ? 0 : static_cast<int64_t>(i);
    std::memcpy(out.data() + 10 + header.size() + 8 * i, &v, 8);
  }
  return out;
}

struct Entry {
  std::string name;
  Bytes data;
  bool symlink = false;
};

// Builds a zip in memory with libarchive's writer, deflated or stored.
Bytes make_zip(const std::vector<Entry>& entries, bool deflate) {
  size_t capacity = 64 * 1024;
  for (const Entry& e : entries) capacity += e.data.size() + 1024;
  Bytes buffer(capacity);
  size_t used = 0;
  archive* a = archive_write_new();
  REQUIRE(archive_write_set_format_zip(a) == ARCHIVE_OK);
  if (deflate)
    REQUIRE(archive_write_zip_set_compression_deflate(a) == ARCHIVE_OK);
  else
    REQUIRE(archive_write_zip_set_compression_store(a) == ARCHIVE_OK);
  REQUIRE(archive_write_open_memory(a, buffer.data(), buffer.size(), &used) == ARCHIVE_OK);
  for (const Entry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_filetype(entry, e.symlink ? AE_IFLNK : AE_IFREG);
    archive_entry_set_perm(entry, 0644);
    if (e.symlink) archive_entry_set_symlink(entry, "target.npy");
    archive_entry_set_size(entry, e.symlink ? 0 : static_cast<la_int64_t>(e.data.size()));
    REQUIRE(archive_write_header(a, entry) == ARCHIVE_OK);
    if (!e.symlink && !e.data.empty())
      REQUIRE(archive_write_data(a, e.data.data(), e.data.size()) ==
              static_cast<la_ssize_t>(e.data.size()));
    archive_entry_free(entry);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
  buffer.resize(used);
  return buffer;
}

std::vector<int64_t> i64_values(const FieldValue& v) {
  std::vector<int64_t> out(v.data.size() / 8);
  std::memcpy(out.data(), v.data.data(), out.size() * 8);
  return out;
}

// Overwrites every little-endian uint32 size field equal to `from` in zip headers with `to`.
void patch_sizes(Bytes& zip, uint32_t from, uint32_t to) {
  for (size_t i = 0; i + 4 <= zip.size(); ++i) {
    uint32_t v;
    std::memcpy(&v, zip.data() + i, 4);
    if (v == from) std::memcpy(zip.data() + i, &to, 4);
  }
}

}  // namespace

TEST_CASE("npz: stored and deflated entries become fields in zip order") {
  for (bool deflate : {false, true}) {
    INFO("deflate " << deflate);
    const Bytes zip = make_zip(
        {{"b.npy", npy_i64(3)}, {"a.npy", npy_i64(2)}, {"dir/c.npy", npy_i64(0)}}, deflate);
    const tarmac::Fields fields = tarmac::parse_npz(zip, "lab.", kLimit);
    REQUIRE(fields.size() == 3);
    CHECK(fields[0].first == "lab.b");
    CHECK(fields[1].first == "lab.a");
    CHECK(fields[2].first == "lab.dir/c");
    CHECK(fields[0].second.dtype == DType::I64);
    CHECK(i64_values(fields[0].second) == std::vector<int64_t>{0, 1, 2});
    CHECK(fields[1].second.shape == std::vector<int64_t>{2});
    CHECK(fields[2].second.shape == std::vector<int64_t>{0});
  }
}

TEST_CASE("npz: an empty zip has no fields") {
  CHECK(tarmac::parse_npz(make_zip({}, true), "", kLimit).empty());
}

TEST_CASE("npz: entries that are not .npy arrays are refused") {
  CHECK_THROWS_WITH(tarmac::parse_npz(make_zip({{"notes.txt", {'h', 'i'}}}, false), "", kLimit),
                    Contains("'notes.txt', which is not a .npy"));
  CHECK_THROWS_WITH(tarmac::parse_npz(make_zip({{".npy", npy_i64(1)}}, false), "", kLimit),
                    Contains("not a .npy"));
  CHECK_THROWS_WITH(tarmac::parse_npz(make_zip({{"d.npy", {}, true}}, false), "", kLimit),
                    Contains("not a regular file"));
}

TEST_CASE("npz: duplicate entry names are refused") {
  CHECK_THROWS_WITH(
      tarmac::parse_npz(make_zip({{"x.npy", npy_i64(1)}, {"x.npy", npy_i64(2)}}, true), "", kLimit),
      Contains("'x.npy' twice"));
}

TEST_CASE("npz: a bad array names its entry") {
  Bytes bad = npy_i64(2);
  bad.pop_back();
  CHECK_THROWS_WITH(
      tarmac::parse_npz(make_zip({{"ok.npy", npy_i64(1)}, {"bad.npy", bad}}, true), "", kLimit),
      Contains("'bad.npy' in the .npz: the .npy data is truncated"));
}

TEST_CASE("npz: zip bomb over the member limit is refused") {
  const Bytes big = npy_i64(1 << 20, true);  // 8 MiB of zeros
  const Bytes zip = make_zip({{"bomb.npy", big}}, true);
  CHECK(zip.size() < 100'000);
  CHECK_THROWS_WITH(tarmac::parse_npz(zip, "", kLimit), Contains("more than the limit"));
  CHECK(tarmac::parse_npz(zip, "", big.size()).size() == 1);

  SECTION("declared sizes that lie are caught by counting the inflated bytes") {
    Bytes liar = zip;
    patch_sizes(liar, static_cast<uint32_t>(big.size()), 100);
    CHECK_THROWS_WITH(tarmac::parse_npz(liar, "", kLimit), Contains("expands past the limit"));
    CHECK_THROWS_WITH(tarmac::parse_npz(liar, "", 1000), Contains("expands past the limit"));
  }
}

TEST_CASE("npz: garbage and truncated zips are refused") {
  CHECK_THROWS_AS(tarmac::parse_npz(Bytes{}, "", kLimit), ParseError);
  CHECK_THROWS_AS(tarmac::parse_npz(Bytes{'n', 'o', 't', ' ', 'a', ' ', 'z', 'i', 'p'}, "", kLimit),
                  ParseError);
  const Bytes zip = make_zip({{"a.npy", npy_i64(100)}}, true);
  for (size_t cut : {size_t{4}, size_t{30}, size_t{40}, zip.size() / 2}) {
    INFO("cut at " << cut);
    CHECK_THROWS_AS(tarmac::parse_npz(Bytes(zip.begin(), zip.begin() + static_cast<ptrdiff_t>(cut)),
                                      "", kLimit),
                    ParseError);
  }
}

TEST_CASE("npz fixture written by numpy.savez_compressed") {
  const tarmac::Fields fields =
      tarmac::parse_npz(tarmac::test::read_fixture("labels/two_arrays.npz"), "y_", kLimit);
  REQUIRE(fields.size() == 2);
  CHECK(fields[0].first == "y_labels");
  CHECK(fields[0].second.dtype == DType::I64);
  CHECK(i64_values(fields[0].second) == std::vector<int64_t>{3, 1, 4});
  CHECK(fields[1].first == "y_boxes");
  CHECK(fields[1].second.dtype == DType::F32);
  CHECK(fields[1].second.shape == std::vector<int64_t>{2, 2});
  std::vector<float> boxes(4);
  std::memcpy(boxes.data(), fields[1].second.data.data(), 16);
  CHECK(boxes == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
}

TEST_CASE("npz: the limit holds for the entries together, and names the flag given") {
  const Bytes a = npy_i64(1000, true), b = npy_i64(1000, true);
  const Bytes zip = make_zip({{"a.npy", a}, {"b.npy", b}}, true);
  CHECK(tarmac::parse_npz(zip, "", a.size() + b.size()).size() == 2);
  // Each fits alone; the second passes the limit after the first (by its declared size, or
  // while inflating when the zip declares none).
  CHECK_THROWS_WITH(tarmac::parse_npz(zip, "", a.size() + b.size() - 1, "--max-label-size"),
                    Contains("'b.npy' in the .npz") &&
                        Contains("the limit of " + std::to_string(a.size() + b.size() - 1) +
                                 " bytes (--max-label-size)") &&
                        Contains("before it"));
}
