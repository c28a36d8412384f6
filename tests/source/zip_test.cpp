// The zip central directory parser and the workers' unpacking of zip members. Fixtures are
// written here from PKWARE's APPNOTE (what Python's zipfile will not write: ZIP64 central
// directory entries for small members, lying sizes) and compressed by zlib, the oracle.
#include <zlib.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "source/member.h"
#include "source/packed_member.h"
#include "source/zip_directory.h"

using tarmac::ErrorCode;
using tarmac::Member;
using tarmac::Packing;
using tarmac::ParseError;
using tarmac::SampleError;
using tarmac::ZipEntry;

namespace {

using Bytes = std::vector<uint8_t>;

void put16(Bytes& b, uint32_t v) {
  for (int i = 0; i < 2; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put(Bytes& b, const std::string& s) {
  b.insert(b.end(), s.begin(), s.end());
}

Bytes raw_deflate(const std::string& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&z, static_cast<uLong>(data.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

uint32_t zlib_crc(const std::string& s) {
  return static_cast<uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

struct Spec {
  std::string name, content;
  bool deflate = true;
  bool zip64 = false;  // ZIP64 extra field in the central directory, 32-bit fields 0xffffffff
  uint32_t unix_mode = 0100644;
};

// A zip of `specs`, with ZIP64 end records when `end64`.
Bytes make_zip(const std::vector<Spec>& specs, bool end64) {
  Bytes file, cd;
  for (const auto& s : specs) {
    const Bytes data =
        s.deflate ? raw_deflate(s.content) : Bytes(s.content.begin(), s.content.end());
    const uint64_t offset = file.size();
    put32(file, 0x04034b50);
    put16(file, 45);
    put16(file, 0);
    put16(file, s.deflate ? 8 : 0);
    put32(file, 0);
    put32(file, zlib_crc(s.content));
    put32(file, static_cast<uint32_t>(data.size()));
    put32(file, static_cast<uint32_t>(s.content.size()));
    put16(file, static_cast<uint32_t>(s.name.size()));
    put16(file, 4);  // an unknown extra field, skipped
    put(file, s.name);
    put32(file, 0xcafe0000);
    file.insert(file.end(), data.begin(), data.end());

    put32(cd, 0x02014b50);
    put16(cd, 0x0300 | 45);  // made on Unix
    put16(cd, 45);
    put16(cd, 0);
    put16(cd, s.deflate ? 8 : 0);
    put32(cd, 0);
    put32(cd, zlib_crc(s.content));
    put32(cd, s.zip64 ? 0xffffffffu : static_cast<uint32_t>(data.size()));
    put32(cd, s.zip64 ? 0xffffffffu : static_cast<uint32_t>(s.content.size()));
    put16(cd, static_cast<uint32_t>(s.name.size()));
    put16(cd, s.zip64 ? 4 + 4 + 24 : 0);  // another field before ZIP64's
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, s.unix_mode << 16);
    put32(cd, s.zip64 ? 0xffffffffu : static_cast<uint32_t>(offset));
    put(cd, s.name);
    if (s.zip64) {
      put16(cd, 0x5455);
      put16(cd, 0);
      put16(cd, 1);
      put16(cd, 24);
      put64(cd, s.content.size());
      put64(cd, data.size());
      put64(cd, offset);
    }
  }
  const uint64_t cd_offset = file.size();
  file.insert(file.end(), cd.begin(), cd.end());
  if (end64) {
    const uint64_t at = file.size();
    put32(file, 0x06064b50);
    put64(file, 44);
    put16(file, 45);
    put16(file, 45);
    put32(file, 0);
    put32(file, 0);
    put64(file, specs.size());
    put64(file, specs.size());
    put64(file, cd.size());
    put64(file, cd_offset);
    put32(file, 0x07064b50);
    put32(file, 0);
    put64(file, at);
    put32(file, 1);
  }
  put32(file, 0x06054b50);
  put16(file, 0);
  put16(file, 0);
  put16(file, end64 ? 0xffff : static_cast<uint32_t>(specs.size()));
  put16(file, end64 ? 0xffff : static_cast<uint32_t>(specs.size()));
  put32(file, end64 ? 0xffffffffu : static_cast<uint32_t>(cd.size()));
  put32(file, end64 ? 0xffffffffu : static_cast<uint32_t>(cd_offset));
  put16(file, 3);
  put(file, "hey");
  return file;
}

tarmac::ZipDirectory parse(const Bytes& file) {
  return tarmac::read_zip_directory(
      [&](uint64_t offset, size_t size, uint8_t* out) {
        if (offset > file.size() || file.size() - offset < size) return false;
        std::memcpy(out, file.data() + offset, size);
        return true;
      },
      file.size());
}

// The member as the reader hands it on, from the directory entry and the file.
Member packed(const Bytes& file, const ZipEntry& z) {
  Member m;
  m.name = z.name;
  m.size = z.size;
  m.crc32 = z.crc32;
  m.packing = z.method == 8 ? Packing::ZipDeflated : Packing::ZipStored;
  const uint64_t data = tarmac::zip_data_offset(file.data() + z.local_offset, z.local_offset);
  m.data.assign(file.begin() + static_cast<ptrdiff_t>(data),
                file.begin() + static_cast<ptrdiff_t>(data + z.compressed_size));
  return m;
}

std::string unpacked(const Member& m) {
  Member scratch;
  const Member& u = tarmac::unpack_member(m, scratch);
  return {u.data.begin(), u.data.end()};
}

ErrorCode unpack_code(const Member& m, std::string* what = nullptr) {
  try {
    unpacked(m);
  } catch (const SampleError& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return ErrorCode::None;
}

}  // namespace

TEST_CASE("zip directory: plain and ZIP64 entries and end records, in file order") {
  const std::string text(3000, 'q');
  const std::vector<Spec> specs = {
      {"a/0.json", "{\"id\": 0}"},         {"a/0.jpg", text, false, true},
      {"a/", "", false, false, 040755},    {"a/link.jpg", "0.jpg", false, false, 0120777},
      {"a/1.txt", text + "x", true, true},
  };
  for (bool end64 : {false, true}) {
    const Bytes file = make_zip(specs, end64);
    const auto dir = parse(file);
    REQUIRE(dir.entries.size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const ZipEntry& z = dir.entries[i];
      CHECK(z.name == specs[i].name);
      CHECK(z.size == specs[i].content.size());
      CHECK(z.crc32 == zlib_crc(specs[i].content));
      CHECK(z.method == (specs[i].deflate ? 8 : 0));
      if (i > 0) CHECK(z.local_offset > dir.entries[i - 1].local_offset);
    }
    CHECK(dir.entries[0].kind == ZipEntry::Kind::File);
    CHECK(dir.entries[2].kind == ZipEntry::Kind::Directory);
    CHECK(dir.entries[3].kind == ZipEntry::Kind::Symlink);
    CHECK(unpacked(packed(file, dir.entries[0])) == "{\"id\": 0}");
    CHECK(unpacked(packed(file, dir.entries[1])) == text);
    CHECK(unpacked(packed(file, dir.entries[4])) == text + "x");
  }
}

TEST_CASE("zip directory: a cut or damaged file is a ParseError, never a crash") {
  const Bytes file = make_zip({{"a.json", "[1]"}, {"b.json", "[2, 3]", false, true}}, true);
  for (size_t cut = 0; cut < file.size(); ++cut) {
    const Bytes part(file.begin(), file.begin() + static_cast<ptrdiff_t>(cut));
    try {
      const auto dir = parse(part);
      // A prefix that still parses must describe members inside it.
      for (const auto& z : dir.entries) CHECK(z.local_offset + z.compressed_size < cut);
    } catch (const ParseError&) {
    }
  }
  for (size_t at = 0; at < file.size(); ++at) {
    Bytes bad = file;
    bad[at] ^= 0xff;
    try {
      parse(bad);
    } catch (const ParseError&) {
    }
  }
  CHECK_THROWS_AS(parse(Bytes(100, 0)), ParseError);
}

TEST_CASE("packed members: inflated, checked against their CRC-32 and size") {
  const std::string text = "a caption, a caption, a caption, and more";
  Member m;
  m.name = "k.txt";
  m.packing = Packing::ZipDeflated;
  m.data = raw_deflate(text);
  m.size = text.size();
  m.crc32 = zlib_crc(text);
  CHECK(unpacked(m) == text);

  SECTION("a wrong CRC-32") {
    m.crc32 ^= 1;
    std::string what;
    CHECK(unpack_code(m, &what) == ErrorCode::CorruptMember);
    CHECK_THAT(what, Catch::Contains("CRC-32"));
  }
  SECTION("a flipped byte") {
    // Refused, or (a flip in the padding bits after the last block) the same text again.
    size_t refused = 0;
    for (size_t i = 0; i < m.data.size(); ++i) {
      Member bad = m;
      bad.data[i] ^= 0x04;
      if (unpack_code(bad) == ErrorCode::CorruptMember)
        ++refused;
      else
        CHECK(unpacked(bad) == text);
    }
    CHECK(refused + 1 >= m.data.size());
  }
  SECTION("cut short") {
    m.data.pop_back();
    CHECK(unpack_code(m) == ErrorCode::CorruptMember);
  }
  SECTION("declared larger or smaller than it inflates") {
    m.size = text.size() + 1;
    std::string what;
    CHECK(unpack_code(m, &what) == ErrorCode::CorruptMember);
    CHECK_THAT(what, Catch::Contains("inflates to " + std::to_string(text.size()) + " bytes"));
    m.size = text.size() - 1;
    CHECK(unpack_code(m, &what) == ErrorCode::CorruptMember);
    CHECK_THAT(what, Catch::Contains("inflates past"));
  }
  SECTION("stored") {
    Member s;
    s.packing = Packing::ZipStored;
    s.data.assign(text.begin(), text.end());
    s.size = text.size();
    s.crc32 = zlib_crc(text);
    Member scratch;
    CHECK(&tarmac::unpack_member(s, scratch) == &s);  // checked, not copied
    s.crc32 ^= 0x100;
    CHECK(unpack_code(s) == ErrorCode::CorruptMember);
  }
  SECTION("refused, and empty") {
    Member r;
    r.packing = Packing::ZipRefused;
    r.refused = "zip member is encrypted";
    std::string what;
    CHECK(unpack_code(r, &what) == ErrorCode::UnsupportedMember);
    CHECK(what == "zip member is encrypted");
    Member e;
    e.packing = Packing::ZipDeflated;
    e.data = raw_deflate("");
    CHECK(unpacked(e).empty());
  }
}

TEST_CASE("packed members: a zip bomb stops at its declared size") {
  const std::string zeros(64 << 20, '\0');
  Member m;
  m.name = "bomb.json";
  m.packing = Packing::ZipDeflated;
  m.data = raw_deflate(zeros);
  m.size = 1000;
  m.crc32 = 0;
  Member scratch;
  std::string what;
  try {
    tarmac::unpack_member(m, scratch);
  } catch (const SampleError& e) {
    what = e.what();
  }
  CHECK_THAT(what, Catch::Contains("inflates past the 1000 bytes"));
  CHECK(scratch.data.empty());
}

namespace {

Bytes read_fixture(const std::string& name) {
  const std::string path = std::string(TARMAC_TEST_DATA) + "/zip/" + name;
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A RangedReadAt over `file` held in memory, each fetch recorded as (offset, size).
struct FakeObject {
  const Bytes& file;
  std::vector<std::pair<uint64_t, size_t>> fetches;
  tarmac::RangedReadAt reader() {
    return tarmac::RangedReadAt(
        [this](uint64_t offset, size_t size) {
          fetches.emplace_back(offset, size);
          REQUIRE(offset + size <= file.size());
          return Bytes(file.begin() + static_cast<ptrdiff_t>(offset),
                       file.begin() + static_cast<ptrdiff_t>(offset + size));
        },
        file.size());
  }
};

tarmac::ZipDirectory parse_ranged(tarmac::RangedReadAt& r, uint64_t size) {
  return tarmac::read_zip_directory(
      [&r](uint64_t offset, size_t n, uint8_t* out) { return r(offset, n, out); }, size);
}

struct Listed {  // a line of Python zipfile's infolist (tests/data/zip/make_fixtures.py prints it)
  std::string name;
  uint64_t header_offset, compress_size, file_size;
  uint32_t crc;
  uint16_t method;
  ZipEntry::Kind kind;
};

}  // namespace

TEST_CASE("zip directory over Range GETs: Python zipfile's offsets and sizes, one fetch") {
  using K = ZipEntry::Kind;
  const std::vector<std::pair<std::string, std::vector<Listed>>> fixtures = {
      {"mixed.zip",
       {{"a/0.json", 0, 33, 116, 0x8611b1a4, 8, K::File},
        {"a/0.png", 71, 512, 512, 0x1c613576, 0, K::File},
        {"a/", 620, 0, 0, 0, 0, K::Directory},
        {"a/1.png", 652, 5, 5, 0x5bb74d14, 0, K::Symlink}}},
      {"descriptors.zip",
       {{"a/0.json", 0, 33, 116, 0x8611b1a4, 8, K::File},
        {"a/0.png", 87, 512, 512, 0x1c613576, 0, K::File},
        {"a/", 652, 0, 0, 0, 0, K::Directory}}},
  };
  std::string json;
  for (int i = 0; i < 4; ++i) json += R"({"id": 0, "note": "deflated"})";
  std::string png;
  for (int i = 0; i < 512; ++i) png += static_cast<char>(i % 256);
  for (const auto& [name, listed] : fixtures) {
    INFO(name);
    const Bytes file = read_fixture(name);
    FakeObject object{file, {}};
    auto ranged = object.reader();
    const auto dir = parse_ranged(ranged, file.size());
    // the object is smaller than the tail: one fetch of all of it
    CHECK(object.fetches == std::vector<std::pair<uint64_t, size_t>>{{0, file.size()}});
    CHECK(ranged.fetches() == 1);
    REQUIRE(dir.entries.size() == listed.size());
    for (size_t i = 0; i < listed.size(); ++i) {
      const ZipEntry& z = dir.entries[i];
      CHECK(z.name == listed[i].name);
      CHECK(z.local_offset == listed[i].header_offset);
      CHECK(z.compressed_size == listed[i].compress_size);
      CHECK(z.size == listed[i].file_size);
      CHECK(z.crc32 == listed[i].crc);
      CHECK(z.method == listed[i].method);
      CHECK(z.kind == listed[i].kind);
    }
    CHECK(unpacked(packed(file, dir.entries[0])) == json);
    CHECK(unpacked(packed(file, dir.entries[1])) == png);
    // the same directory as read by a pread-like function
    const auto direct = parse(file);
    CHECK(direct.directory_offset == dir.directory_offset);
  }
}

TEST_CASE("zip directory over Range GETs: a directory larger than the tail costs one fetch more") {
  std::vector<Spec> specs;
  for (int i = 0; i < 1500; ++i)
    specs.push_back({"d/" + std::to_string(100000 + i) + std::string(60, 'x') + ".json",
                     "[" + std::to_string(i) + "]", i % 2 == 0});
  for (bool end64 : {false, true}) {
    INFO("ZIP64 end records: " << end64);
    const Bytes file = make_zip(specs, end64);
    REQUIRE(file.size() > 2 * tarmac::kZipTailSize);
    FakeObject object{file, {}};
    auto ranged = object.reader();
    const auto dir = parse_ranged(ranged, file.size());
    const auto direct = parse(file);
    REQUIRE(dir.entries.size() == specs.size());
    REQUIRE(direct.entries.size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      CHECK(dir.entries[i].name == specs[i].name);
      CHECK(dir.entries[i].crc32 == zlib_crc(specs[i].content));
      CHECK(dir.entries[i].local_offset == direct.entries[i].local_offset);
      CHECK(dir.entries[i].compressed_size == direct.entries[i].compressed_size);
    }
    // the tail, then the central directory's part before it: nothing else
    const uint64_t tail = file.size() - tarmac::kZipTailSize;
    REQUIRE(object.fetches.size() == 2);
    CHECK(object.fetches[0] == std::pair<uint64_t, size_t>{tail, tarmac::kZipTailSize});
    CHECK(object.fetches[1] ==
          std::pair<uint64_t, size_t>{dir.directory_offset, tail - dir.directory_offset});
    CHECK(ranged.fetches() == 2);
  }
}

TEST_CASE("zip directory over Range GETs: a failed or short fetch stops the parse") {
  const Bytes file = make_zip({{"a.json", "[1]"}, {"b.json", "[2, 3]", false, true}}, true);
  // an error of the network goes through the parser as it is
  tarmac::RangedReadAt failing([](uint64_t, size_t) -> Bytes { throw std::runtime_error("cut"); },
                               file.size());
  CHECK_THROWS_WITH(parse_ranged(failing, file.size()), "cut");
  // fewer bytes than asked for: no end record found, never a read past what was fetched
  tarmac::RangedReadAt short_answer(
      [&](uint64_t offset, size_t size) {
        return Bytes(file.begin() + static_cast<ptrdiff_t>(offset),
                     file.begin() + static_cast<ptrdiff_t>(offset + size / 2));
      },
      file.size());
  CHECK_THROWS_AS(parse_ranged(short_answer, file.size()), ParseError);
}
