// Placing shards (lib/merge/place_shards.cpp): one file linked or copied and checked, and the
// parts' shards renumbered into the staging directory. The expected numbering, sample counts,
// sizes and CRC-32s are those of the checked-in parts a and b (tests/data/datasets/parts,
// written by make_datasets.py: a's 5 samples in shards of 3 and 2, b's 4 in shards of 3 and 1).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../check/part_fixture.h"
#include "common/error.h"
#include "common/stop.h"
#include "merge/merge_internal.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tarmac;
using namespace tarmac::merge_detail;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

void write_bytes(const fs::path& path, size_t size) {
  std::ofstream f(path, std::ios::binary);
  const std::string bytes(size, 'x');
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string place_refusal(const fs::path& from, const fs::path& to, uint64_t needed) {
  try {
    place_shard("P", from, to, false, needed);
  } catch (const FatalError& e) {
    return e.what();
  }
  FAIL("place_shard accepted what it must refuse");
  return "";
}

// The checked-in parts `names`, copied under `root` and opened, all of them holding samples.
PartSet fixture_part_set(const fs::path& root, const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const auto& n : names) paths.push_back(testing::copy_part(root, n, n));
  PartSet set;
  set.all = open_parts(paths);
  for (const auto& p : set.all) set.sampled.push_back(p.get());
  return set;
}

}  // namespace

TEST_CASE("place_shard hard-links a part's shard, or copies it with --copy") {
  const fs::path dir = test::temp_dir("merge", "place_one");
  write_bytes(dir / "from.tar", 1024);
  CHECK(place_shard("P", dir / "from.tar", dir / "linked.tar", false, 600));
  CHECK(fs::hard_link_count(dir / "from.tar") == 2);
  CHECK(fs::file_size(dir / "linked.tar") == 1024);
  CHECK_FALSE(place_shard("P", dir / "from.tar", dir / "copied.tar", true, 1024));
  CHECK(fs::hard_link_count(dir / "copied.tar") == 1);
  CHECK(fs::file_size(dir / "copied.tar") == 1024);
}

TEST_CASE("place_shard refuses a link, a missing file, and one short of its records") {
  const fs::path dir = test::temp_dir("merge", "place_refused");
  write_bytes(dir / "real.tar", 1024);
  fs::create_symlink(dir / "real.tar", dir / "link.tar");
  CHECK_THAT(place_refusal(dir / "link.tar", dir / "out1.tar", 0),
             Equals("part 'P': shard 'link.tar' is not a regular file (a symbolic link, or "
                    "missing): merge takes only the parts' own files; put the file itself "
                    "there, or convert the part again; the merge stopped and wrote nothing "
                    "(run 'tarmac verify P')"));
  CHECK_FALSE(fs::exists(fs::symlink_status(dir / "out1.tar")));
  CHECK_THAT(place_refusal(dir / "absent.tar", dir / "out2.tar", 0),
             Contains("shard 'absent.tar' is not a regular file"));
  // Shorter than the end of its last blob, or not whole 512-byte blocks.
  CHECK_THAT(place_refusal(dir / "real.tar", dir / "out3.tar", 1025),
             Equals("part 'P': shard 'real.tar' is 1024 bytes, not a whole tar holding the 1025 "
                    "bytes its samples' records need; the merge stopped and wrote nothing (run "
                    "'tarmac verify P')"));
  write_bytes(dir / "odd.tar", 1000);
  CHECK_THAT(place_refusal(dir / "odd.tar", dir / "out4.tar", 600),
             Contains("shard 'odd.tar' is 1000 bytes, not a whole tar holding the 600 bytes"));
}

TEST_CASE("place_shards numbers the parts' shards on, each part's first at its base") {
  const fs::path root = test::temp_dir("merge", "place_all");
  const PartSet set = fixture_part_set(root, {"a", "b"});
  const fs::path staging = root / "staging";
  fs::create_directories(staging);
  MergeOptions o;
  MergeResult result;
  const PlacedShards placed = place_shards(o, set, staging, result);
  CHECK(placed.names == std::vector<std::string>{"shard-000000.tar", "shard-000001.tar",
                                                 "shard-000002.tar", "shard-000003.tar"});
  CHECK(placed.base == std::vector<int32_t>{0, 2});
  CHECK(placed.samples == std::vector<uint64_t>{3, 2, 3, 1});
  REQUIRE(placed.manifest.size() == 4);
  // The CRC-32s of the parts' manifests, and the sizes of their shards.
  const std::vector<std::string> crcs{"78fbb2ac", "e4d3aed9", "07ce8e61", "29398081"};
  const std::vector<uint64_t> sizes{4096, 3072, 4096, 2048};
  for (size_t i = 0; i < 4; ++i) {
    CHECK(placed.manifest[i].name == placed.names[i]);
    CHECK(placed.manifest[i].crc32 == crcs[i]);
    CHECK(placed.manifest[i].size == sizes[i]);
    CHECK(fs::file_size(staging / placed.names[i]) == sizes[i]);
  }
  // b's first shard is staged as the merge's third: the same file.
  CHECK(fs::equivalent(staging / "shard-000002.tar", root / "b" / "shard-000000.tar"));
  CHECK(result.samples == 9);
  CHECK(result.shards == 4);
  CHECK(result.linked == 4);
  CHECK(result.copied == 0);
  CHECK(result.image_bytes == 397 + 317);  // the parts' manifests' image_bytes
}

TEST_CASE("place_shards refuses a part's truncated shard, and stops on a stop request") {
  const fs::path root = test::temp_dir("merge", "place_truncated");
  const PartSet set = fixture_part_set(root, {"a", "b"});
  fs::resize_file(root / "b" / "shard-000001.tar", 512);  // its one sample's image is past 512
  const fs::path staging = root / "staging";
  fs::create_directories(staging);
  MergeOptions o;
  MergeResult result;
  CHECK_THROWS_WITH(place_shards(o, set, staging, result),
                    Contains("part '" + (root / "b").string() +
                             "': shard 'shard-000001.tar' is 512 bytes, not a whole tar"));
  StopRequest stop;
  stop.request(2);
  o.stop = &stop;
  fs::remove_all(staging);
  fs::create_directories(staging);
  MergeResult stopped;
  CHECK_THROWS_AS(place_shards(o, set, staging, stopped), Interrupted);
  CHECK(fs::is_empty(staging));
}
