#include "read/partition.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

using namespace tarmac;

TEST_CASE("ranks get equal, disjoint shares that cover every sample") {
  for (uint64_t n : {0, 1, 7, 100, 101}) {
    for (uint64_t world : {1, 3, 8}) {
      for (bool drop : {false, true}) {
        std::multiset<int64_t> all;
        size_t len = SIZE_MAX;
        for (uint64_t r = 0; r < world; ++r) {
          const auto idx = partition_indices(n, {r, world, 42, 3, true, drop});
          if (len == SIZE_MAX) len = idx.size();
          CHECK(idx.size() == len);
          CHECK(idx.size() == partition_size(n, {r, world, 0, 0, true, drop}));
          all.insert(idx.begin(), idx.end());
        }
        const std::set<int64_t> distinct(all.begin(), all.end());
        if (drop) {
          CHECK(len == n / world);
          CHECK(distinct.size() == all.size());
        } else {
          CHECK(len * world >= n);
          CHECK(distinct.size() == n);
        }
        for (int64_t i : distinct) CHECK((i >= 0 && uint64_t(i) < n));
      }
    }
  }
}

TEST_CASE("the order is deterministic, differs by epoch and seed, and is fixed across platforms") {
  const auto a = partition_indices(1000, {0, 1, 7, 0, true, false});
  CHECK(a == partition_indices(1000, {0, 1, 7, 0, true, false}));
  CHECK(a != partition_indices(1000, {0, 1, 7, 1, true, false}));
  CHECK(a != partition_indices(1000, {0, 1, 8, 0, true, false}));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == partition_indices(1000, {0, 1, 7, 0, false, false}));
  // Pinned values: a change of algorithm would silently change every user's order.
  CHECK(partition_indices(10, {0, 1, 0, 0, true, false}) ==
        std::vector<int64_t>{2, 3, 9, 0, 4, 1, 6, 5, 7, 8});
  CHECK(SplitMix64(0).next() == 0xE220A8397B1DCDAFull);
}

TEST_CASE("bad rank or world is refused") {
  CHECK_THROWS_AS(partition_indices(10, {0, 0, 0, 0, true, false}), ArgumentError);
  CHECK_THROWS_AS(partition_indices(10, {2, 2, 0, 0, true, false}), ArgumentError);
}
