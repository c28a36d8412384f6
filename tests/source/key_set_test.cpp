#include <catch2/catch.hpp>

#include <string>

#include "source/key_set.h"

using tarmac::KeySet;

namespace {

std::string key_of(uint32_t i) {
  return "shard-" + std::to_string(i % 97) + "/" + std::to_string(i);
}

}  // namespace

TEST_CASE("KeySet: insert, find, assign") {
  KeySet s;
  CHECK(!s.find("a"));
  CHECK(s.size() == 0);
  CHECK(!s.insert("a", 3));
  CHECK(s.insert("a", 4) == 3u);  // already there: the first value stays
  CHECK(s.find("a") == 3u);
  s.assign("a", 7);
  CHECK(s.find("a") == 7u);
  s.assign("b", 1);
  CHECK(s.find("b") == 1u);
  CHECK(s.size() == 2);
  CHECK(!s.find(""));
  CHECK(!s.insert("", 9));  // the empty key is a key like any other
  CHECK(s.find("") == 9u);
  CHECK(!s.find("a "));
}

TEST_CASE("KeySet: a million distinct keys, no false match, growth by doubling") {
  KeySet s;
  constexpr uint32_t n = 1000000;
  size_t capacity = 0, doublings = 0;
  for (uint32_t i = 0; i < n; ++i) {
    // A false match would return a value here: every key is new.
    REQUIRE(!s.insert(key_of(i), i));
    if (s.capacity() != capacity) {
      if (capacity) CHECK(s.capacity() == 2 * capacity);
      capacity = s.capacity();
      ++doublings;
    }
    CHECK(s.size() * 4 <= s.capacity() * 3);
  }
  CHECK(s.size() == n);
  CHECK(doublings > 5);
  for (uint32_t i = 0; i < n; ++i) REQUIRE(s.find(key_of(i)) == i);
  // Keys never added, some of them near misses of added ones.
  for (uint32_t i = 0; i < n; ++i) {
    REQUIRE(!s.find(key_of(i) + "x"));
    REQUIRE(!s.find("shard-" + std::to_string(i % 97 + 1) + "/" + std::to_string(i)));
  }
  // 20 bytes a slot; at most 3/4 full.
  CHECK(s.memory_bytes() == s.capacity() * 20);
  CHECK(static_cast<double>(s.memory_bytes()) / n < 2 * 20 / 0.75);
}

TEST_CASE("key_fingerprint: the first half is 64-bit FNV-1a, the halves differ") {
  // Reference values of the FNV-1a 64-bit test suite.
  CHECK(tarmac::key_fingerprint("").a == 0xcbf29ce484222325ull);
  CHECK(tarmac::key_fingerprint("a").a == 0xaf63dc4c8601ec8cull);
  CHECK(tarmac::key_fingerprint("foobar").a == 0x85944171f73967e8ull);
  // Stable across runs and machines: the second half is pinned too.
  const auto f = tarmac::key_fingerprint("foobar");
  CHECK(f.b != f.a);
  CHECK(tarmac::key_fingerprint("foobar") == f);
  CHECK(!(tarmac::key_fingerprint("foobaR") == f));
}
