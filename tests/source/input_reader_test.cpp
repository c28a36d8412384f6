#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "source/input_reader.h"
#include "source/packed_member.h"

using tarmac::FatalError;
using tarmac::InputCallbacks;
using tarmac::InputReader;
using tarmac::InputReaderOptions;
using tarmac::Member;
using tarmac::MemberNotice;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/tarmac_source_test_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

enum class Kind { File, Dir, Symlink, Hardlink };

struct Entry {
  std::string name;
  std::string data;
  Kind kind = Kind::File;
  std::string target;  // symlink / hard link target
};

// Writes `entries` with libarchive's write API: a fixture made by a real tar/zip writer.
void write_archive(const std::string& path, int format, int filter,
                   const std::vector<Entry>& entries) {
  archive* a = archive_write_new();
  REQUIRE(archive_write_set_format(a, format) == ARCHIVE_OK);
  if (filter != ARCHIVE_FILTER_NONE) REQUIRE(archive_write_add_filter(a, filter) == ARCHIVE_OK);
  REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
  for (const auto& e : entries) {
    archive_entry* ae = archive_entry_new();
    archive_entry_set_pathname(ae, e.name.c_str());
    archive_entry_set_mtime(ae, 1700000000, 0);
    switch (e.kind) {
      case Kind::File:
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, 0644);
        archive_entry_set_size(ae, static_cast<la_int64_t>(e.data.size()));
        break;
      case Kind::Dir:
        archive_entry_set_filetype(ae, AE_IFDIR);
        archive_entry_set_perm(ae, 0755);
        break;
      case Kind::Symlink:
        archive_entry_set_filetype(ae, AE_IFLNK);
        archive_entry_set_perm(ae, 0777);
        archive_entry_set_symlink(ae, e.target.c_str());
        break;
      case Kind::Hardlink:
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, 0644);
        archive_entry_set_hardlink(ae, e.target.c_str());
        archive_entry_set_size(ae, 0);
        break;
    }
    REQUIRE(archive_write_header(a, ae) == ARCHIVE_OK);
    if (e.kind == Kind::File && !e.data.empty())
      REQUIRE(archive_write_data(a, e.data.data(), e.data.size()) ==
              static_cast<la_ssize_t>(e.data.size()));
    archive_entry_free(ae);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint32_t zlib_crc(const std::vector<uint8_t>& bytes) {
  return static_cast<uint32_t>(::crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
}

// Deterministic bytes that do not compress.
std::string noise(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

struct Collected {
  std::vector<std::pair<uint32_t, Member>> members;
  std::vector<MemberNotice> notices;
  std::vector<uint32_t> ends;

  InputCallbacks callbacks() {
    return {[this](uint32_t i, Member&& m) { members.emplace_back(i, std::move(m)); },
            [this](MemberNotice&& n) { notices.push_back(std::move(n)); },
            [this](uint32_t i) { ends.push_back(i); }};
  }
  std::map<std::string, std::string> by_name() const {
    std::map<std::string, std::string> out;
    for (const auto& [i, m] : members) {  // zip members as the workers unpack them
      Member scratch;
      const Member& u = tarmac::unpack_member(m, scratch);
      out[u.name] = std::string(u.data.begin(), u.data.end());
    }
    return out;
  }
  const MemberNotice* notice(const std::string& member) const {
    for (const auto& n : notices)
      if (n.member == member) return &n;
    return nullptr;
  }
};

// The same tricky content in every format: what must come out is listed beside it.
std::vector<Entry> tricky_entries(bool with_hardlink, bool with_symlink = true) {
  std::vector<Entry> e = {
      {"data/", "", Kind::Dir, ""},
      {"data/0001.jpg", "jpeg bytes 1", Kind::File, ""},
      {"data/0001.json", "{\"label\": 1}", Kind::File, ""},
      {"./data/0002.jpg", "jpeg bytes 2", Kind::File, ""},
      {"data/big.bin", std::string(5000, 'x'), Kind::File, ""},
      {"../x.jpg", "escape", Kind::File, ""},
      {"data/empty.txt", "", Kind::File, ""},
  };
  if (with_symlink) e.push_back({"data/link.jpg", "", Kind::Symlink, "0001.jpg"});
  if (with_hardlink) e.push_back({"data/hard.jpg", "", Kind::Hardlink, "data/0001.jpg"});
  return e;
}

void check_tricky(const Collected& c, bool with_hardlink, bool with_symlink = true) {
  const auto got = c.by_name();
  const std::map<std::string, std::string> want = {
      {"data/0001.jpg", "jpeg bytes 1"},
      {"data/0001.json", "{\"label\": 1}"},
      {"data/0002.jpg", "jpeg bytes 2"},  // "./" stripped
      {"data/empty.txt", ""},
  };
  CHECK(got == want);
  CHECK(c.members.size() == want.size());

  const MemberNotice* n = nullptr;
  if (with_symlink) {
    n = c.notice("data/link.jpg");
    REQUIRE(n != nullptr);
    CHECK_FALSE(n->is_error);
    CHECK_THAT(n->reason, Catch::Contains("symbolic link"));
  }

  n = c.notice("data/big.bin");
  REQUIRE(n != nullptr);
  CHECK(n->is_error);
  CHECK_THAT(n->reason, Catch::Contains("--max-member-size"));

  n = c.notice("../x.jpg");
  REQUIRE(n != nullptr);
  CHECK(n->is_error);
  CHECK_THAT(n->reason, Catch::Contains("unsafe"));

  if (with_hardlink) {
    n = c.notice("data/hard.jpg");
    REQUIRE(n != nullptr);
    CHECK_FALSE(n->is_error);
    CHECK_THAT(n->reason, Catch::Contains("hard link"));
  }
  CHECK(c.notice("data/") == nullptr);  // directories pass silently
  CHECK(c.notices.size() == 2u + with_hardlink + with_symlink);
  CHECK(c.ends == std::vector<uint32_t>{0});
}

// A pax .tar.gz of `n` members "1000.bin", "1001.bin", ... of 100,000 noise bytes each
// (noise(100000, k) for member 1000 + k); returns the entries written.
std::vector<Entry> write_noise_tar_gz(const std::string& path, int n) {
  std::vector<Entry> entries;
  for (int i = 0; i < n; ++i)
    entries.push_back({std::to_string(1000 + i) + ".bin", noise(100000, i), Kind::File, ""});
  write_archive(path, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_GZIP, entries);
  return entries;
}

}  // namespace

TEST_CASE("InputReader: every tar format and filter yields the same members and notices") {
  struct Variant {
    const char* label;
    int format, filter;
    const char* file;
  };
  const Variant variants[] = {
      {"ustar", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_NONE, "a.tar"},
      {"pax+gzip", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_GZIP, "a.tar.gz"},
      {"gnutar+zstd", ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FILTER_ZSTD, "a.tar.zst"},
      {"pax+xz", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_XZ, "a.tar.xz"},
      {"gnutar+gzip", ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FILTER_GZIP, "a.tgz"},
  };
  for (const auto& v : variants) {
    SECTION(v.label) {
      TempDir dir;
      const std::string path = dir.file(v.file);
      write_archive(path, v.format, v.filter, tricky_entries(true));
      InputReaderOptions opt;
      opt.max_member_size = 1000;
      InputReader reader({path}, opt);
      Collected c;
      reader.run(c.callbacks());
      check_tricky(c, true);

      const auto bytes = read_file(path);
      const auto& info = reader.inputs().at(0);
      CHECK(info.path == path);
      CHECK(info.size == bytes.size());
      CHECK(info.bytes_read == bytes.size());
      CHECK(info.crc32 == zlib_crc(bytes));
      CHECK(info.error.empty());
      CHECK(info.members >= c.members.size() + c.notices.size());
      CHECK(reader.bytes_read() == bytes.size());
      CHECK(reader.total_size() == bytes.size());
    }
  }
}

TEST_CASE("InputReader: zip archives") {
  TempDir dir;
  const std::string path = dir.file("a.zip");
  write_archive(path, ARCHIVE_FORMAT_ZIP, ARCHIVE_FILTER_NONE, tricky_entries(false, false));
  InputReaderOptions opt;
  opt.max_member_size = 1000;
  InputReader reader({path}, opt);
  Collected c;
  reader.run(c.callbacks());
  check_tricky(c, false, false);
  const auto bytes = read_file(path);
  CHECK(reader.inputs()[0].bytes_read == bytes.size());
  CHECK(reader.inputs()[0].crc32 == zlib_crc(bytes));
}

// Regression (fixed with a seek callback): a symbolic link in a zip is handed on as a regular
// member whose bytes are the link's target ("0001.jpg"). InputReader gives libarchive no seek
// callback, so the zip reader streams local headers only and never sees the file type kept in the
// central directory.
TEST_CASE("InputReader: a symlink in a zip is not handed on as data") {
  TempDir dir;
  const std::string path = dir.file("link.zip");
  write_archive(
      path, ARCHIVE_FORMAT_ZIP, ARCHIVE_FILTER_NONE,
      {{"0001.jpg", "jpeg bytes", Kind::File, ""}, {"link.jpg", "", Kind::Symlink, "0001.jpg"}});
  InputReader reader({path}, {});
  Collected c;
  reader.run(c.callbacks());
  CHECK(c.by_name() == std::map<std::string, std::string>{{"0001.jpg", "jpeg bytes"}});
  const MemberNotice* n = c.notice("link.jpg");
  REQUIRE(n != nullptr);
  CHECK_FALSE(n->is_error);
}

TEST_CASE("InputReader: long names survive pax and gnutar") {
  const std::string long_name = std::string(150, 'd') + "/" + std::string(120, 'n') + ".json";
  for (int format : {ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FORMAT_TAR_GNUTAR}) {
    TempDir dir;
    const std::string path = dir.file("long.tar");
    write_archive(path, format, ARCHIVE_FILTER_NONE, {{long_name, "[1, 2]", Kind::File, ""}});
    InputReader reader({path}, {});
    Collected c;
    reader.run(c.callbacks());
    REQUIRE(c.members.size() == 1);
    CHECK(c.members[0].second.name == long_name);
    CHECK(c.notices.empty());
  }
}

TEST_CASE("InputReader: a member of exactly max_member_size is kept") {
  TempDir dir;
  const std::string path = dir.file("edge.tar");
  write_archive(path, ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_GZIP,
                {{"a.bin", std::string(100, 'a'), Kind::File, ""},
                 {"b.bin", std::string(101, 'b'), Kind::File, ""},
                 {"c.bin", std::string(99, 'c'), Kind::File, ""}});
  InputReaderOptions opt;
  opt.max_member_size = 100;
  InputReader reader({path}, opt);
  Collected c;
  reader.run(c.callbacks());
  CHECK(c.by_name() == std::map<std::string, std::string>{{"a.bin", std::string(100, 'a')},
                                                          {"c.bin", std::string(99, 'c')}});
  REQUIRE(c.notices.size() == 1);
  CHECK(c.notices[0].member == "b.bin");
  CHECK(c.notices[0].is_error);
}

TEST_CASE("InputReader: several inputs are read in order with their own indices") {
  TempDir dir;
  const std::string p0 = dir.file("0.tar"), p1 = dir.file("1.tar.gz");
  write_archive(p0, ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_NONE,
                {{"a.jpg", "A", Kind::File, ""}, {"b.jpg", "B", Kind::File, ""}});
  write_archive(p1, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_GZIP,
                {{"c.jpg", "C", Kind::File, ""}, {"../d.jpg", "D", Kind::File, ""}});
  InputReader reader({p0, p1}, {});
  const auto b0 = read_file(p0), b1 = read_file(p1);
  CHECK(reader.total_size() == b0.size() + b1.size());
  std::vector<std::string> events;
  InputCallbacks cb{
      [&](uint32_t i, Member&& m) { events.push_back(std::to_string(i) + ":" + m.name); },
      [&](MemberNotice&& n) { events.push_back(std::to_string(n.input) + "!" + n.member); },
      [&](uint32_t i) { events.push_back("end" + std::to_string(i)); }};
  reader.run(cb);
  CHECK(events ==
        std::vector<std::string>{"0:a.jpg", "0:b.jpg", "end0", "1:c.jpg", "1!../d.jpg", "end1"});
  CHECK(reader.inputs()[0].crc32 == zlib_crc(b0));
  CHECK(reader.inputs()[1].crc32 == zlib_crc(b1));
  CHECK(reader.bytes_read() == b0.size() + b1.size());
}

TEST_CASE("InputReader: a truncated .tar.gz is fatal and names the archive") {
  TempDir dir;
  const std::string path = dir.file("cut.tar.gz");
  const auto entries = write_noise_tar_gz(path, 6);
  const auto full = read_file(path);
  REQUIRE(full.size() > 500000);
  fs::resize_file(path, full.size() / 2);

  SECTION("without skip_errors it throws") {
    InputReader reader({path}, {});
    Collected c;
    try {
      reader.run(c.callbacks());
      FAIL("expected FatalError");
    } catch (const FatalError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains(path));
    }
    CHECK(c.ends.empty());
  }
  SECTION("with skip_errors it records the error and goes on") {
    const std::string next = dir.file("next.tar");
    write_archive(next, ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_NONE,
                  {{"z.jpg", "Z", Kind::File, ""}});
    InputReaderOptions opt;
    opt.skip_errors = true;
    InputReader reader({path, next}, opt);
    Collected c;
    reader.run(c.callbacks());
    const auto& info = reader.inputs()[0];
    CHECK_THAT(info.error, Catch::Contains(path));
    CHECK(reader.inputs()[1].error.empty());
    CHECK(c.ends == std::vector<uint32_t>{0, 1});
    // What was handed on from the cut archive is whole and correct; the cut member is not.
    size_t from_cut = 0;
    for (const auto& [i, m] : c.members) {
      if (i != 0) continue;
      ++from_cut;
      const int k = std::stoi(m.name.substr(0, 4)) - 1000;
      CHECK(std::string(m.data.begin(), m.data.end()) == noise(100000, k));
    }
    CHECK(from_cut < entries.size());
    REQUIRE_FALSE(c.members.empty());
    CHECK(c.members.back().first == 1);
    CHECK(c.members.back().second.name == "z.jpg");
  }
}

TEST_CASE("InputReader: a corrupted .tar.gz is fatal, names the archive and says why") {
  TempDir dir;
  const std::string path = dir.file("bad.tar.gz");
  write_noise_tar_gz(path, 4);
  auto bytes = read_file(path);
  bytes[bytes.size() * 3 / 4] ^= 0x5a;  // in the deflate data of a later member's bytes
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  }
  InputReader reader({path}, {});
  Collected c;
  try {
    reader.run(c.callbacks());
    FAIL("expected FatalError");
  } catch (const FatalError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains(path));
    CHECK_THAT(std::string(e.what()), Catch::Contains("gzip data is corrupt"));
  }
  // Whatever was handed on before the damage is intact.
  for (const auto& [i, m] : c.members)
    CHECK(std::string(m.data.begin(), m.data.end()) ==
          noise(100000, std::stoi(m.name.substr(0, 4)) - 1000));
}
TEST_CASE("InputReader: a file that is no archive is fatal, or recorded under skip") {
  TempDir dir;
  const std::string path = dir.file("notes.tar");
  std::ofstream(path) << std::string(3000, '\x01') << "this is not an archive";
  {
    InputReader reader({path}, {});
    Collected c;
    CHECK_THROWS_AS(reader.run(c.callbacks()), FatalError);
    try {
      reader.run(c.callbacks());
    } catch (const FatalError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains(path));
    }
  }
  {
    InputReaderOptions opt;
    opt.skip_errors = true;
    InputReader reader({path}, opt);
    Collected c;
    reader.run(c.callbacks());
    CHECK_THAT(reader.inputs()[0].error, Catch::Contains(path));
    CHECK(c.members.empty());
  }
}

TEST_CASE("InputReader: a missing input is fatal at construction") {
  CHECK_THROWS_AS(InputReader({"/nonexistent/tarmac/input.tar"}, {}), FatalError);
  try {
    InputReader r({"/nonexistent/tarmac/input.tar"}, {});
  } catch (const FatalError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/nonexistent/tarmac/input.tar"));
  }
}

TEST_CASE("InputReader: directories are read recursively in sorted order") {
  TempDir dir;
  const std::string root = dir.file("in");
  fs::create_directories(root + "/b/sub");
  fs::create_directories(root + "/a");
  const std::map<std::string, std::string> files = {
      {"a/0002.jpg", "two"}, {"a/0001.jpg", "one"}, {"b/sub/0003.json", "{}"},
      {"0000.cls", "7"},     {"b/empty.txt", ""},
  };
  for (const auto& [name, data] : files) std::ofstream(root + "/" + name, std::ios::binary) << data;
  std::ofstream(root + "/b/huge.bin", std::ios::binary) << std::string(2000, 'h');
  fs::create_symlink("0001.jpg", root + "/a/zlink.jpg");

  InputReaderOptions opt;
  opt.max_member_size = 1000;
  InputReader reader({root}, opt);
  Collected c;
  reader.run(c.callbacks());

  std::vector<std::string> order;
  std::vector<uint8_t> all;
  for (const auto& [i, m] : c.members) {
    CHECK(i == 0);
    order.push_back(m.name);
    all.insert(all.end(), m.data.begin(), m.data.end());
  }
  CHECK(order == std::vector<std::string>{"0000.cls", "a/0001.jpg", "a/0002.jpg", "b/empty.txt",
                                          "b/sub/0003.json"});
  CHECK(c.by_name() == files);
  const auto& info = reader.inputs()[0];
  // The CRC covers the bytes read: the members' data in the order they were handed on.
  CHECK(info.crc32 == zlib_crc(all));
  CHECK(info.bytes_read == all.size());
  CHECK(reader.bytes_read() == all.size());
  CHECK(c.ends == std::vector<uint32_t>{0});

  const MemberNotice* big = c.notice("b/huge.bin");
  REQUIRE(big != nullptr);
  CHECK(big->is_error);
  CHECK_THAT(big->reason, Catch::Contains("--max-member-size"));
  CHECK(c.notices.size() == 2);
}

// Regression: the notice named the link's target, since fs::relative() follows the link.
TEST_CASE("InputReader: a symlink in a directory input is reported under its own name") {
  TempDir dir;
  const std::string root = dir.file("in");
  fs::create_directories(root + "/a");
  std::ofstream(root + "/a/0001.jpg") << "one";
  fs::create_symlink("0001.jpg", root + "/a/zlink.jpg");
  InputReader reader({root}, {});
  Collected c;
  reader.run(c.callbacks());
  REQUIRE(c.notices.size() == 1);
  CHECK(c.notices[0].member == "a/zlink.jpg");
  CHECK_FALSE(c.notices[0].is_error);
  CHECK_THAT(c.notices[0].reason, Catch::Contains("symbolic link"));
  REQUIRE(c.members.size() == 1);
  CHECK(c.members[0].second.name == "a/0001.jpg");
}

// Issue #25, 13: an input rewritten in place (size and mtime kept) after a checkpoint. The
// mark a sample was released at is the CRC-32 of the input's bytes read so far; a resumed
// reader checks the same bytes again and throws InputChanged when they differ.
TEST_CASE("a resumed reader refuses an input changed before the recorded position") {
  TempDir tmp;
  const std::string path = tmp.file("big.tar");
  std::vector<Entry> entries;
  for (int i = 0; i < 4; ++i)
    entries.push_back({"m/" + std::to_string(i) + ".bin", noise(900 << 10, i + 1), Kind::File, ""});
  write_archive(path, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE, entries);
  const std::vector<uint8_t> bytes = read_file(path);

  // The mark when the third member is handed on: inside the input.
  tarmac::ReadMark mark;
  {
    InputReader r({path}, {});
    int seen = 0;
    InputCallbacks cb{[&](uint32_t, Member&&) {
                        if (++seen == 3) mark = r.mark();
                      },
                      [](MemberNotice&&) {}, [](uint32_t) {}};
    r.run(cb);
  }
  REQUIRE_FALSE(mark.at_end);
  REQUIRE(mark.bytes > (1800u << 10));
  REQUIRE(mark.bytes < bytes.size());
  const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(mark.bytes));
  CHECK(mark.crc32 == zlib_crc(prefix));  // what zlib makes of the same bytes

  auto resume = [&] {
    InputReader r({path}, {});
    r.expect({{}, mark});
    Collected c;
    r.run(c.callbacks());
    CHECK(r.verified());
    return c.members.size();
  };
  CHECK(resume() == 4);  // unchanged

  auto poke = [&](size_t at) {
    std::vector<uint8_t> b = bytes;
    b[at] ^= 0x01;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  };
  poke(bytes.size() - 3000);  // after the position: not read before, so not checked
  CHECK(resume() == 4);
  poke(600);  // inside the first member, long converted
  CHECK_THROWS_AS(resume(), tarmac::InputChanged);
  CHECK_THROWS_WITH(resume(), Catch::Contains("changed since the checkpoint") &&
                                  Catch::Contains(path) && Catch::Contains("--overwrite"));
  // Under --on-error skip too: a change is no read error to go on past.
  InputReaderOptions skip;
  skip.skip_errors = true;
  InputReader r({path}, skip);
  r.expect({{}, mark});
  Collected c;
  CHECK_THROWS_AS(r.run(c.callbacks()), tarmac::InputChanged);
}

TEST_CASE("a resumed reader checks inputs read to their end before the recorded one") {
  TempDir tmp;
  const std::string a = tmp.file("a.tar"), b = tmp.file("b.tar");
  write_archive(a, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE,
                {{"k/1.bin", noise(5000, 1), Kind::File, ""}});
  write_archive(b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE,
                {{"k/2.bin", noise(5000, 2), Kind::File, ""}});
  const std::vector<uint8_t> first = read_file(a);
  tarmac::ReadExpectation e;
  e.done = {{first.size(), zlib_crc(first)}};
  e.mark = {1, read_file(b).size(), zlib_crc(read_file(b)), true};
  {
    InputReader r({a, b}, {});
    r.expect(e);
    Collected c;
    r.run(c.callbacks());
    CHECK(r.verified());
  }
  std::vector<uint8_t> changed = first;
  changed[700] ^= 0x20;  // inside k/1.bin's data
  std::ofstream(a, std::ios::binary)
      .write(reinterpret_cast<const char*>(changed.data()),
             static_cast<std::streamsize>(changed.size()));
  InputReader r({a, b}, {});
  r.expect(e);
  Collected c;
  CHECK_THROWS_WITH(r.run(c.callbacks()), Catch::Contains("input '" + a + "' changed"));
  CHECK(c.ends.empty());  // refused before the input's end is handed on
}

// Issue #25, 16g: the run's advice names the input's compression only when it has one.
TEST_CASE("the reader records each input's compression") {
  TempDir tmp;
  const std::vector<Entry> entries = {{"k/1.bin", noise(3000, 7), Kind::File, ""}};
  const std::string plain = tmp.file("a.tar"), gz = tmp.file("a.tar.gz"), xz = tmp.file("a.tar.xz");
  write_archive(plain, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE, entries);
  write_archive(gz, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_GZIP, entries);
  write_archive(xz, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_XZ, entries);
  InputReader r({plain, gz, xz}, {});
  Collected c;
  r.run(c.callbacks());
  CHECK(r.inputs()[0].compression.empty());
  CHECK(r.inputs()[1].compression == "gzip");
  CHECK(r.inputs()[2].compression == "xz");
}
