#include "convert/dedup_index.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "support/temp_dir.h"

using namespace tarmac;

namespace {

// The nearest of `hashes` to `q` within `d` by comparing with every one (lowest index on ties).
std::optional<std::pair<uint32_t, int>> brute_nearest(const std::vector<uint64_t>& hashes,
                                                      uint64_t q, int d) {
  std::optional<std::pair<uint32_t, int>> best;
  for (uint32_t i = 0; i < hashes.size(); ++i) {
    const int x = hamming_distance(q, hashes[i]);
    if (x <= d && (!best || x < best->second)) best = std::pair{i, x};
  }
  return best;
}

uint64_t flip_bits(uint64_t h, int n, std::mt19937_64& rng) {
  uint64_t flipped = 0;
  while (std::popcount(flipped) < n) flipped |= uint64_t{1} << (rng() % 64);
  return h ^ flipped;
}

ContentHash hash_of(uint64_t digest, uint64_t phash) {
  return {{digest, ~digest}, phash};
}

}  // namespace

TEST_CASE("the band index finds what comparing with every hash finds") {
  for (const int d : {0, 1, 3, 4, 8, 32}) {
    INFO("distance " << d);
    std::mt19937_64 rng(static_cast<uint64_t>(d) + 1);
    NearIndex index(d);
    std::vector<uint64_t> hashes;
    for (int i = 0; i < 3000; ++i) {
      // Some hashes near earlier ones (0 to d + 2 bits away), the others random.
      const uint64_t h =
          !hashes.empty() && i % 3 == 0
              ? flip_bits(hashes[rng() % hashes.size()], static_cast<int>(rng() % (d + 3)), rng)
              : rng();
      const auto want = brute_nearest(hashes, h, d);
      const auto got = index.nearest(h);
      REQUIRE(got.has_value() == want.has_value());
      if (want) {
        CHECK(got->second == want->second);
        CHECK(got->first == want->first);
      }
      index.add(h);
      hashes.push_back(h);
    }
    CHECK(index.size() == hashes.size());
  }
  CHECK_THROWS_AS(NearIndex(33), tarmac::InternalError);
  CHECK_THROWS_AS(NearIndex(-1), tarmac::InternalError);
}

TEST_CASE("the dedup index finds exact, near and other datasets' duplicates") {
  const auto dir = test::temp_dir("convert", "dedup_index");
  SECTION("near") {
    DedupIndex index(true, 4, {}, dir / "dedup.index", std::nullopt);
    index.add_other("old", "old/1", 0xF0F0);
    CHECK_FALSE(index.find(hash_of(1, 0xFFFF0000)));
    index.add("a", hash_of(1, 0xFFFF0000));
    // Near mode compares pHashes only: the same digest is nothing, the same pHash distance 0.
    CHECK_FALSE(index.find(hash_of(1, 0x0F)));
    const auto same = index.find(hash_of(0, 0xFFFF0000));
    REQUIRE(same);
    CHECK((same->key == "a" && same->distance == 0 && !same->same_pixels && same->dataset.empty()));
    const auto near = index.find(hash_of(2, 0xFFFF0007));
    REQUIRE(near);
    CHECK((near->key == "a" && near->distance == 3 && !near->same_pixels));
    CHECK_FALSE(index.find(hash_of(2, 0xFFFF001F)));  // 5 bits
    const auto other = index.find(hash_of(3, 0xF0F1));
    REQUIRE(other);
    CHECK((other->key == "old/1" && other->dataset == "old" && other->distance == 1));
  }
  SECTION("exact") {
    DedupIndex index(false, 4, {}, dir / "dedup.index", std::nullopt);
    index.add_other("old", "old/1", 0xF0F0);
    index.add("a", hash_of(1, 0xFF));
    CHECK_FALSE(index.find(hash_of(2, 0xFF)));  // the same phash is no exact duplicate
    CHECK(index.find(hash_of(1, 0))->key == "a");
    // Another dataset holds phashes only: an equal one is its exact match.
    CHECK(index.find(hash_of(5, 0xF0F0))->key == "old/1");
    CHECK_FALSE(index.find(hash_of(5, 0xF0F1)));
  }
}

TEST_CASE("a resumed dedup index knows the samples kept before its checkpoint") {
  const auto dir = test::temp_dir("convert", "dedup_resume");
  const auto file = dir / "dedup.index";
  uint64_t mark = 0;
  {
    DedupIndex index(true, 2, {}, file, std::nullopt);
    index.add("first", hash_of(1, 0x1111));
    index.add(std::string(300, 'k'), hash_of(2, 0xFF00FF00FF00));
    mark = index.checkpoint();
    index.add("after", hash_of(3, 0xABCDEF));  // after the checkpoint: forgotten
    index.checkpoint();
  }
  DedupIndex resumed(true, 2, {}, file, mark);
  CHECK(resumed.kept() == 2);
  CHECK(resumed.find(hash_of(9, 0x1113))->key == "first");
  CHECK(resumed.find(hash_of(0, 0xFF00FF00FF01))->key == std::string(300, 'k'));
  CHECK_FALSE(resumed.find(hash_of(3, 0xABCDEF)));
  resumed.add("again", hash_of(3, 0xABCDEF));
  CHECK(resumed.checkpoint() > mark);
  CHECK_THROWS_AS(DedupIndex(true, 2, {}, file, 1 << 20), FatalError);
  // Exact: the digests are read back (and the pHash alone finds nothing).
  const auto exact_file = dir / "exact.index";
  {
    DedupIndex index(false, 4, {}, exact_file, std::nullopt);
    index.add("x", hash_of(7, 0x77));
    mark = index.checkpoint();
  }
  DedupIndex exact(false, 4, {}, exact_file, mark);
  CHECK(exact.find(hash_of(7, 0))->key == "x");
  CHECK_FALSE(exact.find(hash_of(8, 0x77)));
  CHECK_THROWS_WITH(
      DedupIndex(true, 2, {(dir / "nothing").string()}, dir / "x.index", std::nullopt),
      Catch::Matchers::Contains("--dedup-against"));
}
