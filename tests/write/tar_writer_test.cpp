#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_util.h"
#include "write/tar_writer.h"

using tarmac::TarWriter;
using tarmac::test::read_all;
using tarmac::test::run;
using tarmac::test::shell_quote;
using tarmac::test::TempDir;
using tarmac::test::to_hex;

namespace {

struct Member {
  std::string name;
  std::vector<uint8_t> data;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return v;
}

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Names covering each way a name is stored: plain ustar, ustar prefix/name split,
// and pax "path" records (long or non-ASCII), including record lengths at decimal
// digit boundaries (99/101/102 and 999..1001 bytes), which the length prefix must count.
std::vector<Member> sample_members() {
  std::vector<Member> m;
  m.push_back({"a.txt", pattern(5, 1)});
  m.push_back({"dir/block.bin", pattern(512, 2)});
  m.push_back({"empty", {}});
  m.push_back({"odd/513", pattern(513, 3)});
  m.push_back({std::string(100, 'n'), pattern(511, 4)});                     // fills name[100]
  m.push_back({repeat("d", 150) + "/" + repeat("f", 49), pattern(100, 5)});  // 200, split
  m.push_back({repeat("x", 200), pattern(700, 6)});                          // 200, no slash: pax
  m.push_back({repeat("0123456789/", 18) + "tail.jpg", pattern(33, 8)});     // 206, split
  m.push_back({"images/caf\xc3\xa9_\xe6\x97\xa5\xe6\x9c\xac.jpg", pattern(1000, 9)});  // non-ASCII
  m.push_back({repeat("\xc3\xa9", 100), pattern(10, 10)});  // 200 bytes non-ASCII
  for (size_t len : {90, 91, 92, 993, 994, 995}) {
    // body = len + 7 ("path=", space, newline): 97 -> 99, 98 -> 101, 99 -> 102 bytes;
    // 1000 -> 1004, 1001 -> 1005, 1002 -> 1006 (and 996..999 stay 3-digit).
    std::string name = "\xc3\xa9" + repeat("a/", (len - 3) / 2);
    name.resize(len, 'z');
    m.push_back({name, pattern(len % 7 + 1, static_cast<uint8_t>(len))});
  }
  for (size_t len = 990; len <= 1000; ++len) {
    std::string name = "\xc3\xa9";
    name.resize(len, 'q');
    m.push_back({name, pattern(3, static_cast<uint8_t>(len))});
  }
  return m;
}

// What the archive should list: "name<TAB>size<TAB>hex(data)" per member.
std::string expected_listing(const std::vector<Member>& members) {
  std::string out;
  for (const auto& m : members)
    out += m.name + "\t" + std::to_string(m.data.size()) + "\t" + to_hex(m.data) + "\n";
  return out;
}

std::string write_archive(const TempDir& dir, const std::vector<Member>& members) {
  const std::string path = dir.file("shard.tar");
  TarWriter w(path);
  for (const auto& m : members) {
    const uint64_t before = w.size();
    const uint64_t predicted = w.bytes_if_added(m.name, m.data.size());
    const uint64_t offset = w.add(m.name, m.data);
    CHECK(w.size() - before == predicted);
    CHECK(w.size() % 512 == 0);
    CHECK(offset % 512 == 0);
    CHECK(offset + ((m.data.size() + 511) / 512) * 512 == w.size());
  }
  const uint64_t content = w.size();
  w.finish();
  CHECK(std::filesystem::file_size(path) == content + 1024);
  return path;
}

}  // namespace

TEST_CASE("tar: add() returns the offset of the member's data") {
  TempDir dir;
  const auto members = sample_members();
  const std::string path = dir.file("offsets.tar");
  std::vector<uint64_t> offsets;
  {
    TarWriter w(path);
    for (const auto& m : members) offsets.push_back(w.add(m.name, m.data));
    w.finish();
  }
  const auto bytes = read_all(path);
  for (size_t i = 0; i < members.size(); ++i) {
    INFO(members[i].name);
    REQUIRE(offsets[i] + members[i].data.size() <= bytes.size());
    CHECK(std::equal(members[i].data.begin(), members[i].data.end(), bytes.begin() + offsets[i]));
    // Padding after the data is zero.
    for (uint64_t p = offsets[i] + members[i].data.size(); p % 512 != 0; ++p) CHECK(bytes[p] == 0);
  }
}

TEST_CASE("tar: bytes_if_added is exact and the archive is deterministic") {
  TempDir dir;
  const auto members = sample_members();
  const std::string a = write_archive(dir, members);
  const auto first = read_all(a);
  const std::string b = write_archive(dir, members);
  CHECK(read_all(b) == first);
}

TEST_CASE("tar: bytes_if_added for sizes around the ustar limit of 8 GiB") {
  TempDir dir;
  TarWriter w(dir.file("x.tar"));
  const uint64_t limit = uint64_t{8} << 30;
  CHECK(w.bytes_if_added("a", 0) == 512);
  CHECK(w.bytes_if_added("a", 1) == 1024);
  CHECK(w.bytes_if_added("a", limit - 1) == 512 + limit);
  // A pax header block, one block of records, the ustar header, the data.
  CHECK(w.bytes_if_added("a", limit) == 1536 + limit);
  CHECK(w.bytes_if_added(repeat("x", 101), 1) == 2048);
  w.finish();
}

TEST_CASE("tar: Python's tarfile reads names, sizes, data and attributes") {
  TempDir dir;
  const auto members = sample_members();
  const std::string path = write_archive(dir, members);
  const std::string script =
      "import sys, tarfile\n"
      "with tarfile.open(sys.argv[1], 'r:') as t:\n"
      "    for m in t.getmembers():\n"
      "        assert m.isreg(), m.name\n"
      "        assert (m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname) == (0o644, 0, 0, 0, '', "
      "''), m\n"
      "        d = t.extractfile(m).read()\n"
      "        sys.stdout.buffer.write(m.name.encode('utf-8', 'surrogateescape') + b'\\t' +\n"
      "            str(m.size).encode() + b'\\t' + d.hex().encode() + b'\\n')\n";
  const auto [rc, out] = run("/usr/bin/python3 -c " + shell_quote(script) + " " + path);
  REQUIRE(rc == 0);
  CHECK(out == expected_listing(members));
}

TEST_CASE("tar: GNU tar lists and extracts every member without warnings") {
  TempDir dir;
  const auto members = sample_members();
  const std::string path = write_archive(dir, members);
  const std::string env = "LC_ALL=C.UTF-8 ";
  {
    const auto [rc, out] = run(env + "tar --quoting-style=literal -tf " + path + " 2>&1");
    REQUIRE(rc == 0);
    std::string names;
    for (const auto& m : members) names += m.name + "\n";
    CHECK(out == names);
  }
  {
    const auto [rc, out] = run(env + "tar --quoting-style=literal -tvf " + path + " 2>&1");
    REQUIRE(rc == 0);
    CHECK_THAT(out, Catch::StartsWith("-rw-r--r-- 0/0"));
    CHECK_THAT(out, Catch::Contains("1970-01-01 00:00 a.txt\n"));
  }
  for (const auto& m : members) {
    INFO(m.name);
    const auto [rc, out] = run(env + "tar -xOf " + path + " " + shell_quote(m.name) + " 2>&1");
    CHECK(rc == 0);
    CHECK(out == std::string(m.data.begin(), m.data.end()));
  }
}

TEST_CASE("tar: bsdtar lists and extracts every member") {
  TempDir dir;
  const auto members = sample_members();
  const std::string path = write_archive(dir, members);
  const std::string env = "LC_ALL=C.UTF-8 ";
  {
    const auto [rc, out] = run(env + "bsdtar -tf " + path + " 2>&1");
    REQUIRE(rc == 0);
    std::string names;
    for (const auto& m : members) names += m.name + "\n";
    CHECK(out == names);
  }
  for (const auto& m : members) {
    INFO(m.name);
    const auto [rc, out] = run(env + "bsdtar -xOf " + path + " " + shell_quote(m.name) + " 2>&1");
    CHECK(rc == 0);
    CHECK(out == std::string(m.data.begin(), m.data.end()));
  }
}

TEST_CASE("tar: a member of 8 GiB or more carries a pax size record", "[.][slow]") {
  // The data comes from an untouched anonymous mapping (zero pages cost no memory)
  // and goes through a FIFO into tarfile's stream mode, so nothing lands on disk.
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const size_t big = (size_t{8} << 30) + 3;
  void* mem = ::mmap(nullptr, big, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mem);
  bytes[big - 1] = 0xAB;
  const std::string script =
      "import sys, tarfile\n"
      "with tarfile.open(sys.argv[1], 'r|') as t:\n"
      "    for m in t:\n"
      "        f = t.extractfile(m); n = 0; last = b''\n"
      "        while True:\n"
      "            b = f.read(1 << 22)\n"
      "            if not b: break\n"
      "            n += len(b); last = b[-1:]\n"
      "        print(m.name, m.size, n, last.hex())\n";
  FILE* reader = ::popen(("/usr/bin/python3 -c " + shell_quote(script) + " " + fifo).c_str(), "r");
  REQUIRE(reader != nullptr);
  uint64_t offset = 0;
  {
    TarWriter w(fifo);
    w.add("small", std::span<const uint8_t>(bytes, 1));
    offset = w.add("big.bin", std::span<const uint8_t>(bytes, big));
    CHECK(w.size() == 1024 + 1536 + ((big + 511) / 512) * 512);
    w.finish();
  }
  ::munmap(mem, big);
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, reader)) > 0) out.append(buf, n);
  CHECK(::pclose(reader) == 0);
  CHECK(offset == 1024 + 1536);
  CHECK(out ==
        "small 1 1 00\nbig.bin " + std::to_string(big) + " " + std::to_string(big) + " ab\n");
}

TEST_CASE("tar: names no reader would take for a regular file are refused") {
  TempDir dir;
  TarWriter w(dir.file("x.tar"));
  const std::vector<uint8_t> data{1};
  CHECK_THROWS_AS(w.add("", data), tarmac::InternalError);
  CHECK_THROWS_AS(w.add(std::string_view("a\0b", 3), data), tarmac::InternalError);
  CHECK_THROWS_AS(w.add("dir/", data), tarmac::InternalError);
  CHECK(w.size() == 0);
  w.finish();
}

TEST_CASE("tar: an unwritable path is a FatalError naming it") {
  TempDir dir;
  const std::string path = dir.file("missing/shard.tar");
  CHECK_THROWS_WITH(TarWriter(path), Catch::Contains(path) && Catch::Contains("No such file"));
}
