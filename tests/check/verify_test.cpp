#include "check/verify.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include <unistd.h>

#include "check/inspect.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/stop.h"
#include "part_fixture.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tarmac;

namespace {

fs::path temp_dir(const std::string& name) {
  return test::temp_dir("check", name);
}

check::VerifyReport run_verify(const std::string& dir, bool decode = false) {
  check::VerifyOptions o;
  o.dir = dir;
  o.decode = decode;
  o.threads = 2;
  return check::verify_dataset(o, nullptr);
}

bool mentions(const check::VerifyReport& r, const std::string& text) {
  for (const auto& p : r.problems)
    if ((p.file + " " + p.sample + " " + p.what).find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("an intact dataset verifies, with and without decoding") {
  const std::string ds = testing::copy_part(temp_dir("intact"), "ds", "s12");
  for (bool decode : {false, true}) {
    const auto r = run_verify(ds, decode);
    INFO((r.problems.empty() ? "" : r.problems[0].file + ": " + r.problems[0].what));
    CHECK(r.ok());
    CHECK(r.samples == 12);
    CHECK(r.blobs == 12);
    CHECK(r.shards > 1);
  }
}

TEST_CASE("every one of 300 random byte flips is found") {
  const std::string ds = testing::copy_part(temp_dir("flips"), "ds", "s10");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(ds)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::mt19937_64 rng(7);
  for (int k = 0; k < 300; ++k) {
    const fs::path& f = files[rng() % files.size()];
    const uint64_t pos = rng() % fs::file_size(f);
    const uint8_t mask = static_cast<uint8_t>(1 + rng() % 255);
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(static_cast<std::streamoff>(pos));
    const char old = static_cast<char>(io.get());
    io.seekp(static_cast<std::streamoff>(pos));
    io.put(static_cast<char>(old ^ mask));
    io.flush();
    const auto r = run_verify(ds);
    io.seekp(static_cast<std::streamoff>(pos));
    io.put(old);
    io.flush();
    INFO(f.filename().string() << " byte " << pos << " ^ " << int(mask));
    CHECK_FALSE(r.ok());
  }
  CHECK(run_verify(ds).ok());
}

TEST_CASE("missing, extra and truncated files are reported, never a crash") {
  const fs::path root = temp_dir("files");
  const std::string ds = testing::copy_part(root, "ds", "s6");
  SECTION("not a dataset") {
    CHECK(mentions(run_verify((root / "nothing").string()), "not a directory"));
    fs::create_directories(root / "empty");
    CHECK(mentions(run_verify((root / "empty").string()), "not a tarmac dataset"));
  }
  SECTION("extra shard") {
    fs::copy_file(fs::path(ds) / "shard-000000.tar", fs::path(ds) / "shard-000042.tar");
    CHECK(mentions(run_verify(ds), "extra shard"));
  }
  SECTION("missing shard") {
    fs::remove(fs::path(ds) / "shard-000001.tar");
    CHECK(mentions(run_verify(ds), "cannot be read"));
  }
  SECTION("truncated shard and annotation file") {
    fs::resize_file(fs::path(ds) / "shard-000000.tar", 700);
    CHECK(mentions(run_verify(ds), "truncated"));
    for (uint64_t size : {0, 7, 100}) {
      fs::resize_file(fs::path(ds) / "labels.safetensors", size);
      CHECK_FALSE(run_verify(ds).ok());
    }
  }
}

TEST_CASE("pick_samples: k distinct sorted indices, the same for a seed") {
  const auto a = check::pick_samples(1000, 50, 3);
  CHECK(a.size() == 50);
  CHECK(std::is_sorted(a.begin(), a.end()));
  CHECK(std::adjacent_find(a.begin(), a.end()) == a.end());
  CHECK(a.back() < 1000);
  CHECK(check::pick_samples(1000, 50, 3) == a);
  CHECK(check::pick_samples(1000, 50, 4) != a);
  CHECK(check::pick_samples(5, 9, 0) == std::vector<uint64_t>{0, 1, 2, 3, 4});
  // every index is drawn about equally often (Floyd's algorithm is uniform): 4000 draws of 3 of 6
  std::vector<int> seen(6, 0);
  for (uint64_t seed = 0; seed < 4000; ++seed)
    for (uint64_t i : check::pick_samples(6, 3, seed)) ++seen[i];
  for (int c : seen) CHECK(std::abs(c - 2000) < 150);
}

TEST_CASE("verify --sample: checks the chosen blobs from their bytes alone") {
  const std::string ds = testing::copy_part(temp_dir("sample"), "ds", "s12");
  check::VerifyOptions o;
  o.dir = ds;
  o.threads = 2;
  o.sample = 4;
  o.decode = true;
  auto r = check::verify_dataset(o, nullptr);
  INFO((r.problems.empty() ? "" : r.problems[0].file + ": " + r.problems[0].what));
  CHECK(r.ok());
  CHECK(r.sampled == 4);
  CHECK(r.blobs == 4);
  check::Annotation a;
  std::vector<check::Problem> problems;
  REQUIRE(a.open(ds, false, problems));
  const auto chosen = check::pick_samples(12, 4, 0);
  uint64_t want = 0;
  for (uint64_t i : chosen) want += 512 + static_cast<uint64_t>(a.blob(0, i).size);
  CHECK(r.bytes_checked - a.file().bytes().size() < want + 4096);  // + manifest, shard list
  // A byte flipped in a chosen blob, and one in its tar header, are found and named; one in a
  // blob not chosen is not read.
  const check::BlobRef b = a.blob(0, chosen[1]);
  const fs::path shard = fs::path(ds) / a.shards()[static_cast<size_t>(b.shard)];
  for (int64_t at : {b.offset + b.size / 2, b.offset - 512 + 10}) {
    std::fstream io(shard, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(at);
    const char old = static_cast<char>(io.get());
    io.seekp(at);
    io.put(static_cast<char>(old ^ 0x20));
    io.flush();
    r = check::verify_dataset(o, nullptr);
    io.seekp(at);
    io.put(old);
    io.flush();
    CHECK_FALSE(r.ok());
    CHECK(mentions(r, a.key(chosen[1])));
    CHECK(mentions(r, a.shards()[static_cast<size_t>(b.shard)]));
  }
  uint64_t other = 0;
  while (std::binary_search(chosen.begin(), chosen.end(), other)) ++other;
  const check::BlobRef c = a.blob(0, other);
  const fs::path other_shard = fs::path(ds) / a.shards()[static_cast<size_t>(c.shard)];
  {
    std::fstream io(other_shard, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(c.offset + 1);
    const char old = static_cast<char>(io.get());
    io.seekp(c.offset + 1);
    io.put(static_cast<char>(old ^ 0x20));
    io.flush();
    CHECK(check::verify_dataset(o, nullptr).ok());
    o.sample = 0;
    CHECK_FALSE(check::verify_dataset(o, nullptr).ok());  // the full check reads it
    io.seekp(c.offset + 1);
    io.put(old);
  }
}

TEST_CASE("cat's helpers: labels as JSON, blob bytes by key or #index") {
  const std::string ds = testing::copy_part(temp_dir("inspect"), "ds", "s5");
  check::Annotation a;
  std::vector<check::Problem> problems;
  REQUIRE(a.open(ds, true, problems));
  REQUIRE(problems.empty());
  CHECK(a.find("s/003") == 3u);
  CHECK(a.find("#4") == 4u);
  CHECK_FALSE(a.find("#5"));
  const auto j = check::sample_json(a, 2);
  CHECK(j["labels"]["cls"] == 2);
  CHECK(j["labels"]["name"] == "n2");
  CHECK(j["labels"]["pts"].size() == 3);
  const check::DatasetSource src(ds);
  CHECK_FALSE(src.remote());
  const auto bytes = check::read_blob(src, a, check::blob_kind(a, "image"), 2);
  CHECK(bytes.size() == static_cast<size_t>(a.blob(0, 2).size));
  CHECK_THROWS_AS(check::blob_kind(a, "depth"), FatalError);
}

namespace {

// Rewrites `dir`'s manifest with `edit` applied and sealed again as format.md 5 says (the
// CRC-32 of the text with the seal's digits 00000000), so that only the edit is wrong.
void edit_manifest(const std::string& dir,
                   const std::function<void(nlohmann::ordered_json&)>& edit) {
  const fs::path path = fs::path(dir) / "manifest.json";
  std::ifstream in(path);
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(in);
  in.close();
  edit(m);
  m.erase("manifest_crc32");
  m["manifest_crc32"] = "00000000";
  std::string text = m.dump(2) + "\n";
  const std::string seal = crc32_hex(crc32_update(0, text.data(), text.size()));
  text.replace(text.rfind("00000000"), 8, seal);
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("verify: a manifest's counts that its lists contradict, each named") {
  const std::string ds = testing::copy_part(temp_dir("counts"), "ds", "s12");
  edit_manifest(ds, [](nlohmann::ordered_json& m) {
    m["counts"]["duplicates"] = 2;
    m["counts"]["ignored_members"] = 1;
  });
  const auto r = run_verify(ds);
  CHECK(!r.ok());
  CHECK(mentions(r, "counts.duplicates is 2 but \"duplicates\" lists 0"));
  CHECK(mentions(r, "counts.ignored_members is 1 but \"ignored\" lists members: 0"));
  CHECK(!mentions(r, "seal"));
}

TEST_CASE("verify: a manifest key of the wrong type is named, not read") {
  const std::string ds = testing::copy_part(temp_dir("types"), "ds", "s12");
  edit_manifest(ds, [](nlohmann::ordered_json& m) { m["labels_crc32"] = 5; });
  const auto r = run_verify(ds);
  CHECK(!r.ok());
  CHECK(mentions(r, "manifest.json  manifest: \"labels_crc32\" is not a string"));
}

namespace {

// Flips byte `at` of `file` (xor 0x20).
void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(at);
  const char old = static_cast<char>(io.get());
  io.seekp(at);
  io.put(static_cast<char>(old ^ 0x20));
}

}  // namespace

TEST_CASE("verify: a report is the same on 1, 2 and 8 threads, the shards' problems in order") {
  const std::string ds = testing::copy_part(temp_dir("order"), "ds", "s12");
  check::Annotation a;
  std::vector<check::Problem> opened;
  REQUIRE(a.open(ds, false, opened));
  REQUIRE(a.shards().size() >= 3);
  // Every shard damaged: the middle of each of its blobs, and the manifest's record of it.
  for (uint64_t i = 0; i < a.size(); ++i) {
    const check::BlobRef b = a.blob(0, i);
    flip_byte(fs::path(ds) / a.shards()[static_cast<size_t>(b.shard)], b.offset + b.size / 2);
  }
  edit_manifest(ds, [](nlohmann::ordered_json& m) {
    for (auto& s : m["shards"]) s["crc32"] = "00000000";
  });
  auto report = [&](int threads) {
    check::VerifyOptions o;
    o.dir = ds;
    o.threads = threads;
    return check::verify_dataset(o, nullptr);
  };
  const check::VerifyReport one = report(1);
  REQUIRE(one.problem_count >= a.size() + a.shards().size());
  // A shard's problems, then the manifest's about it, then the next shard's.
  size_t at = 0;
  for (const std::string& shard : a.shards()) {
    while (at < one.problems.size() && one.problems[at].file != shard) ++at;
    REQUIRE(at < one.problems.size());
    while (at < one.problems.size() && one.problems[at].file == shard) ++at;
    REQUIRE(at < one.problems.size());
    CHECK(one.problems[at].file == "manifest.json");
    CHECK_THAT(one.problems[at].what, Catch::Matchers::StartsWith("CRC-32 of " + shard));
  }
  for (int threads : {2, 8}) {
    INFO("threads " << threads);
    const check::VerifyReport r = report(threads);
    REQUIRE(r.problems.size() == one.problems.size());
    for (size_t k = 0; k < r.problems.size(); ++k) {
      CHECK(r.problems[k].file == one.problems[k].file);
      CHECK(r.problems[k].sample == one.problems[k].sample);
      CHECK(r.problems[k].what == one.problems[k].what);
    }
    CHECK(r.problem_count == one.problem_count);
    CHECK(r.bytes_checked == one.bytes_checked);
  }
}

TEST_CASE("verify: a stop request ends the check with Interrupted, naming the signal") {
  const std::string ds = testing::copy_part(temp_dir("stop"), "ds", "s12");
  StopRequest stop;
  stop.request(SIGTERM);
  check::VerifyOptions o;
  o.dir = ds;
  o.threads = 2;
  o.stop = &stop;
  CHECK_THROWS_WITH(check::verify_dataset(o, nullptr), "stopped by SIGTERM");
}

TEST_CASE("verify: progress from the calling thread, monotone, ending final at the total") {
  const std::string ds = testing::copy_part(temp_dir("progress"), "ds", "s12");
  std::vector<check::VerifyProgress> seen;
  const auto caller = std::this_thread::get_id();
  check::VerifyOptions o;
  o.dir = ds;
  o.threads = 2;
  const auto r = check::verify_dataset(o, [&](const check::VerifyProgress& p) {
    CHECK(std::this_thread::get_id() == caller);
    seen.push_back(p);
  });
  CHECK(r.ok());
  REQUIRE_FALSE(seen.empty());
  for (size_t k = 1; k < seen.size(); ++k) CHECK(seen[k].bytes_done >= seen[k - 1].bytes_done);
  for (size_t k = 0; k + 1 < seen.size(); ++k) CHECK_FALSE(seen[k].final);
  CHECK(seen.back().final);
  CHECK(seen.back().bytes_done == seen.back().bytes_total);
  CHECK(seen.back().bytes_total > 0);
}

namespace {

// A ustar header built by hand (POSIX.1-1988's layout, not our writer's code): `name`, `size`
// and `type`, its checksum as six octal digits, NUL, space.
std::string ustar_header(const std::string& name, uint64_t size, char type) {
  std::string h(512, '\0');
  h.replace(0, name.size(), name);
  h.replace(100, 7, "0000644");
  h.replace(108, 7, "0000000");
  h.replace(116, 7, "0000000");
  char octal[16];
  std::snprintf(octal, sizeof octal, "%011llo", static_cast<unsigned long long>(size));
  h.replace(124, 11, octal);
  h.replace(136, 11, "00000000000");
  h[156] = type;
  h.replace(257, 8,
            std::string("ustar\0"
                        "00",
                        8));
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(octal, sizeof octal, "%06o", sum);
  h.replace(148, 6, octal);
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("verify: the shard walk names each fault of a shard's tar structure, with its byte") {
  const fs::path root = temp_dir("tar-structure");
  const std::string ds = testing::copy_part(root, "ds", "s6");
  const fs::path shard = fs::path(ds) / "shard-000000.tar";
  const std::string intact = read_bytes(shard);
  REQUIRE(intact.size() % 512 == 0);
  REQUIRE(intact.substr(intact.size() - 1024) == std::string(1024, '\0'));
  const uint64_t end = intact.size() - 1024;  // where the end-of-archive blocks begin
  const std::string body = intact.substr(0, end);
  SECTION("a member the annotation file does not place") {
    write_bytes(shard, body + ustar_header("stray.txt", 3, '0') + "abc" + std::string(509, '\0') +
                           std::string(1024, '\0'));
    CHECK(mentions(run_verify(ds), "member 'stray.txt' at byte " + std::to_string(end) +
                                       " is not referenced by the annotation file"));
  }
  SECTION("a member that is not a regular file") {
    write_bytes(shard, body + ustar_header("dir/", 0, '5') + std::string(1024, '\0'));
    CHECK(mentions(run_verify(ds), "member 'dir/' at byte " + std::to_string(end) +
                                       " is not a regular file (type '5')"));
  }
  SECTION("two pax headers in a row") {
    const std::string pax = "17 path=pax.name\n";
    REQUIRE(pax.size() == 17);  // a pax record's length counts itself
    const std::string padded_pax = pax + std::string(512 - pax.size(), '\0');
    write_bytes(shard, body + ustar_header("PaxHeader", pax.size(), 'x') + padded_pax +
                           ustar_header("PaxHeader", pax.size(), 'x') + padded_pax +
                           std::string(1024, '\0'));
    CHECK(mentions(run_verify(ds), "tar header at byte " + std::to_string(end + 1024) +
                                       ": two pax headers in a row"));
  }
  SECTION("the end-of-archive blocks: the second one not zero, bytes after them") {
    std::string bad = intact;
    bad[bad.size() - 1] = 'x';
    write_bytes(shard, bad);
    CHECK(mentions(run_verify(ds), "the second end-of-archive block at byte " +
                                       std::to_string(end + 512) + " is not zero"));
    write_bytes(shard, intact + std::string(512, '\0'));
    CHECK(mentions(run_verify(ds), "512 byte(s) follow the end-of-archive blocks"));
  }
  SECTION("a damaged header: the blobs it hid are named, the walk goes on") {
    std::string bad = intact;
    bad[0] ^= 0x20;  // the first member's name: its checksum no longer adds up
    write_bytes(shard, bad);
    const auto r = run_verify(ds);
    CHECK(mentions(r, "tar header at byte 0: checksum mismatch"));
    CHECK(mentions(r, ": its tar header is damaged"));
  }
}
