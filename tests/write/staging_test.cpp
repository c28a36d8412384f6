#include "write/staging.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace fs = std::filesystem;
using tarmac::test::TempDir;

namespace {

void touch(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

}  // namespace

TEST_CASE("publish moves shards, manifest and annotation file in; staging goes away") {
  TempDir dir;
  const fs::path out = dir.path(), staging = out / ".tarmac-partial";
  fs::create_directories(staging);
  touch(staging / "shard-000000.tar", "s0");
  touch(staging / "shard-000001.tar", "s1");
  touch(staging / "manifest.json", "{}");
  touch(staging / "labels.safetensors", "L");
  tarmac::publish_dataset(out, staging, {"shard-000000.tar", "shard-000001.tar"}, {});
  CHECK(slurp(out / "shard-000001.tar") == "s1");
  CHECK(slurp(out / "labels.safetensors") == "L");
  CHECK(fs::exists(out / "manifest.json"));
  CHECK_FALSE(fs::exists(staging));
}

TEST_CASE(
    "publish --overwrite removes the files it is given only (a user's shard-notes.txt and an "
    "unlisted shard-000002.tar stay)") {
  TempDir dir;
  const fs::path out = dir.path(), staging = out / ".tarmac-partial";
  for (const char* old : {"shard-000000.tar", "shard-000001.tar", "shard-000002.tar",
                          "labels.safetensors", "manifest.json"})
    touch(out / old, "old");
  touch(out / "shard-notes.txt", "mine");
  touch(out / "shard-x.tar", "mine too");
  fs::create_directories(staging);
  touch(staging / "shard-000000.tar", "new");
  touch(staging / "manifest.json", "{}");
  touch(staging / "labels.safetensors", "L");
  tarmac::publish_dataset(
      out, staging, {"shard-000000.tar"},
      {"shard-000000.tar", "shard-000001.tar", "labels.safetensors", "manifest.json"});
  CHECK(slurp(out / "shard-000000.tar") == "new");
  CHECK_FALSE(fs::exists(out / "shard-000001.tar"));  // the old dataset's: gone
  CHECK(slurp(out / "shard-000002.tar") == "old");    // named like a shard, listed by none
  CHECK(slurp(out / "shard-notes.txt") == "mine");
  CHECK(slurp(out / "shard-x.tar") == "mine too");
  CHECK(slurp(out / "labels.safetensors") == "L");
}
