#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.h"
#include "source/sample_grouper.h"

using tarmac::GrouperOptions;
using tarmac::KeySet;
using tarmac::Member;
using tarmac::OnDuplicate;
using tarmac::RawSample;
using tarmac::SampleError;
using tarmac::SampleGrouper;

namespace {

Member member(const std::string& name, size_t size) {
  return Member{name, std::vector<uint8_t>(size, static_cast<uint8_t>(name.size()))};
}

// Adds `name` under the key given by the part before the first dot.
void add(SampleGrouper& g, uint32_t input, const std::string& name, size_t size,
         std::vector<RawSample>& ready) {
  g.add(input, member(name, size), name.substr(0, name.find('.')), ready);
}

std::vector<std::string> keys(const std::vector<RawSample>& v) {
  std::vector<std::string> k;
  for (const auto& s : v) k.push_back(s.key);
  return k;
}

std::vector<std::string> names(const RawSample& s) {
  std::vector<std::string> n;
  for (const auto& m : s.members) n.push_back(m.name);
  return n;
}

}  // namespace

TEST_CASE("SampleGrouper: adjacent members form one sample, released on flush") {
  SampleGrouper g(1 << 20);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 10, ready);
  add(g, 0, "a.json", 5, ready);
  add(g, 0, "b.jpg", 7, ready);
  CHECK(ready.empty());
  CHECK(g.pending_bytes() == 22);
  g.flush(ready);
  CHECK(g.pending_bytes() == 0);
  REQUIRE(keys(ready) == std::vector<std::string>{"a", "b"});
  CHECK(names(ready[0]) == std::vector<std::string>{"a.jpg", "a.json"});
  CHECK(ready[0].bytes() == 15);
  CHECK(ready[0].input == 0);
  CHECK(ready[0].errors.empty());
  CHECK(names(ready[1]) == std::vector<std::string>{"b.jpg"});
  CHECK(ready[1].members[0].data == std::vector<uint8_t>(7, 5));
}

TEST_CASE("SampleGrouper: members need not be adjacent inside the window") {
  SampleGrouper g(1000);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 10, ready);
  add(g, 0, "b.jpg", 10, ready);
  add(g, 0, "c.jpg", 10, ready);
  add(g, 0, "b.json", 1, ready);
  add(g, 0, "a.json", 1, ready);
  g.flush(ready);
  // Released in order of first appearance, each with all its members.
  REQUIRE(keys(ready) == std::vector<std::string>{"a", "b", "c"});
  CHECK(names(ready[0]) == std::vector<std::string>{"a.jpg", "a.json"});
  CHECK(names(ready[1]) == std::vector<std::string>{"b.jpg", "b.json"});
  CHECK(names(ready[2]) == std::vector<std::string>{"c.jpg"});
}

TEST_CASE("SampleGrouper: oldest samples leave FIFO once the window is exceeded") {
  SampleGrouper g(100);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 60, ready);
  add(g, 0, "a.json", 10, ready);
  CHECK(g.pending_bytes() == 70);
  add(g, 0, "b.jpg", 30, ready);  // 100 bytes: not over the window yet
  CHECK(ready.empty());
  CHECK(g.pending_bytes() == 100);
  add(g, 0, "c.jpg", 1, ready);  // 101 > 100: 'a' leaves (70 bytes), 31 remain
  REQUIRE(keys(ready) == std::vector<std::string>{"a"});
  CHECK(ready[0].members.size() == 2);
  CHECK(g.pending_bytes() == 31);
  add(g, 0, "d.jpg", 80, ready);  // 111 > 100: 'b' leaves, 81 remain
  CHECK(keys(ready) == std::vector<std::string>{"a", "b"});
  CHECK(g.pending_bytes() == 81);
  g.flush(ready);
  CHECK(keys(ready) == std::vector<std::string>{"a", "b", "c", "d"});
}

TEST_CASE("SampleGrouper: the newest sample stays even when it alone exceeds the window") {
  SampleGrouper g(10);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 50, ready);
  CHECK(ready.empty());  // nothing older to release
  add(g, 0, "a.json", 50, ready);
  CHECK(ready.empty());
  CHECK(g.pending_bytes() == 100);
  add(g, 0, "b.jpg", 1, ready);
  REQUIRE(keys(ready) == std::vector<std::string>{"a"});
  CHECK(ready[0].bytes() == 100);
  CHECK(g.pending_bytes() == 1);
}

TEST_CASE("SampleGrouper: a window of zero releases every sample but the newest") {
  SampleGrouper g(0);
  std::vector<RawSample> ready;
  for (int i = 0; i < 5; ++i) add(g, 0, std::to_string(i) + ".jpg", 3, ready);
  CHECK(keys(ready) == std::vector<std::string>{"0", "1", "2", "3"});
  g.flush(ready);
  CHECK(ready.size() == 5);
}

TEST_CASE("SampleGrouper: a member arriving after its sample left names --group-window") {
  SampleGrouper g(15);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 10, ready);
  add(g, 0, "b.jpg", 10, ready);  // 'a' leaves
  REQUIRE(keys(ready) == std::vector<std::string>{"a"});
  try {
    add(g, 0, "a.json", 1, ready);
    FAIL("expected SampleError");
  } catch (const SampleError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("--group-window"));
    CHECK_THAT(msg, Catch::Contains("a.json"));
  }
  // The grouper goes on; the rejected member changed nothing.
  CHECK(g.pending_bytes() == 10);
  add(g, 0, "c.jpg", 1, ready);
  g.flush(ready);
  CHECK(keys(ready) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("SampleGrouper: a key already read from another input is a duplicate") {
  SampleGrouper g(1 << 20);
  std::vector<RawSample> ready;
  add(g, 0, "dir/x.jpg", 4, ready);
  g.flush(ready);
  add(g, 1, "dir/x.jpg", 4, ready);
  add(g, 1, "dir/x.json", 4, ready);  // the same bad sample: one error, not two
  // A new key in the second input is fine, and is tagged with its input.
  add(g, 1, "dir/y.jpg", 4, ready);
  g.flush(ready);
  REQUIRE(keys(ready) == std::vector<std::string>{"dir/x", "dir/x", "dir/y"});
  REQUIRE(ready[1].errors.size() == 1);
  const std::string msg = ready[1].errors[0];
  CHECK_THAT(msg, Catch::Contains("'dir/x'"));
  CHECK_THAT(msg, Catch::Contains("duplicate key"));
  CHECK_THAT(msg, Catch::Contains("input #1"));
  CHECK_THAT(msg, Catch::Contains("input #2"));
  CHECK_THAT(msg, !Catch::Contains("--group-window"));
  CHECK(ready[1].input == 1);
  CHECK(ready[0].errors.empty());
  CHECK(ready[2].input == 1);
  // A third input still names the first one: the bad sample did not take the key over.
  add(g, 2, "dir/x.jpg", 4, ready);
  g.flush(ready);
  REQUIRE(ready.size() == 4);
  CHECK_THAT(ready[3].errors.at(0), Catch::Contains("input #3") && Catch::Contains("input #1"));
}

TEST_CASE("SampleGrouper: a member name repeated within a sample is a sample error") {
  SampleGrouper g(1 << 20);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 10, ready);
  add(g, 0, "a.jpg", 10, ready);
  add(g, 0, "a.json", 2, ready);
  CHECK(g.pending_bytes() == 12);  // the repeat is not kept
  g.flush(ready);
  REQUIRE(ready.size() == 1);
  CHECK(names(ready[0]) == std::vector<std::string>{"a.jpg", "a.json"});
  REQUIRE(ready[0].errors.size() == 1);
  CHECK_THAT(ready[0].errors[0], Catch::Contains("a.jpg"));
}

TEST_CASE("SampleGrouper: many samples keep their order and byte accounting") {
  SampleGrouper g(1000);
  std::vector<RawSample> ready;
  uint64_t added = 0;
  for (int i = 0; i < 500; ++i) {
    const std::string k = std::to_string(100000 + i);
    add(g, 0, k + ".jpg", 37, ready);
    add(g, 0, k + ".cls", 3, ready);
    added += 40;
    uint64_t out = 0;
    for (const auto& s : ready) out += s.bytes();
    CHECK(out + g.pending_bytes() == added);
    CHECK(g.pending_bytes() <= 1000 + 40);
  }
  g.flush(ready);
  REQUIRE(ready.size() == 500);
  for (int i = 0; i < 500; ++i) {
    CHECK(ready[i].key == std::to_string(100000 + i));
    CHECK(ready[i].members.size() == 2);
  }
}

GrouperOptions named(OnDuplicate d, const KeySet* kept = nullptr) {
  GrouperOptions o;
  o.window_bytes = 1 << 20;
  o.on_duplicate = d;
  o.input_names = {"a.tar", "b.tar", "c.tar"};
  o.kept = kept;
  return o;
}

TEST_CASE("SampleGrouper: a duplicate key's error names both inputs") {
  SampleGrouper g(named(OnDuplicate::Error));
  std::vector<RawSample> ready;
  add(g, 0, "k/1.jpg", 4, ready);
  g.flush(ready);
  add(g, 2, "k/1.json", 4, ready);
  g.flush(ready);
  REQUIRE(ready.size() == 2);
  CHECK(!ready[1].dropped);
  REQUIRE(ready[1].errors.size() == 1);
  const std::string msg = ready[1].errors[0];
  CHECK_THAT(msg, Catch::Contains("'k/1'"));
  CHECK_THAT(msg, Catch::Contains("of 'c.tar'"));
  CHECK_THAT(msg, Catch::Contains("from 'a.tar'"));
  CHECK_THAT(msg, Catch::Contains("--on-duplicate"));
}

TEST_CASE("SampleGrouper: --on-duplicate first leaves later samples of a key out, noted") {
  SampleGrouper g(named(OnDuplicate::First));
  std::vector<RawSample> ready;
  add(g, 0, "k/1.jpg", 4, ready);
  add(g, 0, "k/2.jpg", 4, ready);
  g.flush(ready);
  add(g, 1, "k/1.jpg", 5, ready);
  add(g, 1, "k/1.json", 6, ready);
  add(g, 1, "k/3.jpg", 7, ready);
  g.flush(ready);
  add(g, 2, "k/1.jpg", 8, ready);
  g.flush(ready);
  CHECK(keys(ready) == std::vector<std::string>{"k/1", "k/2", "k/1", "k/3", "k/1"});
  CHECK(!ready[0].dropped);
  CHECK(names(ready[0]) == std::vector<std::string>{"k/1.jpg"});
  CHECK(ready[0].bytes() == 4);
  for (size_t i : {2, 4}) {
    INFO(i);
    CHECK(ready[i].dropped);
    CHECK(ready[i].members.empty());
    REQUIRE(ready[i].duplicates.size() == 1);
    CHECK(ready[i].duplicates[0].member.empty());
    CHECK(ready[i].duplicates[0].kept_input == 0);
    CHECK(ready[i].duplicates[0].reason ==
          "duplicate key 'k/1': kept the one from 'a.tar' (--on-duplicate first)");
  }
  CHECK(ready[2].input == 1);
  CHECK(ready[4].input == 2);
  CHECK(!ready[3].dropped);
  CHECK(g.pending_bytes() == 0);
}

TEST_CASE("SampleGrouper: a member twice in a sample keeps the first or the last") {
  for (auto d : {OnDuplicate::First, OnDuplicate::Last}) {
    SampleGrouper g(named(d));
    std::vector<RawSample> ready;
    g.add(0, Member{"s.json", {1}}, "s", ready);
    g.add(0, Member{"s.jpg", {2, 2}}, "s", ready);
    g.add(0, Member{"s.json", {3, 3, 3}}, "s", ready);
    CHECK(g.pending_bytes() == (d == OnDuplicate::First ? 3u : 5u));
    g.flush(ready);
    REQUIRE(ready.size() == 1);
    const RawSample& s = ready[0];
    CHECK(s.errors.empty());
    CHECK(!s.dropped);
    REQUIRE(s.duplicates.size() == 1);
    CHECK(s.duplicates[0].member == "s.json");
    CHECK(s.duplicates[0].kept_input == 0);
    if (d == OnDuplicate::First) {
      CHECK(names(s) == std::vector<std::string>{"s.json", "s.jpg"});
      CHECK(s.members[0].data == std::vector<uint8_t>{1});
      CHECK_THAT(s.duplicates[0].reason, Catch::Contains("kept the first (--on-duplicate first)"));
    } else {
      CHECK(names(s) == std::vector<std::string>{"s.jpg", "s.json"});
      CHECK(s.members[1].data == std::vector<uint8_t>{3, 3, 3});
      CHECK_THAT(s.duplicates[0].reason, Catch::Contains("kept the last (--on-duplicate last)"));
    }
  }
}

TEST_CASE("SampleGrouper: --on-duplicate last leaves out what the pre-pass did not keep") {
  // The pre-pass found k/1 last in c.tar and k/2 only in a.tar.
  KeySet kept;
  kept.assign("k/1", 2);
  kept.assign("k/2", 0);
  SampleGrouper g(named(OnDuplicate::Last, &kept));
  std::vector<RawSample> ready;
  add(g, 0, "k/1.jpg", 4, ready);
  add(g, 0, "k/2.jpg", 4, ready);
  g.flush(ready);
  add(g, 1, "k/1.jpg", 4, ready);
  g.flush(ready);
  add(g, 2, "k/1.jpg", 9, ready);
  g.flush(ready);
  REQUIRE(keys(ready) == std::vector<std::string>{"k/1", "k/2", "k/1", "k/1"});
  CHECK(ready[0].dropped);
  CHECK(!ready[1].dropped);
  CHECK(ready[2].dropped);
  CHECK(!ready[3].dropped);
  CHECK(ready[3].bytes() == 9);
  CHECK(ready[0].duplicates.at(0).reason ==
        "duplicate key 'k/1': kept the one from 'c.tar' (--on-duplicate last)");
  CHECK(ready[2].duplicates.at(0).kept_input == 2);
  // The kept sample's members stay a window error if they come back after it left.
  CHECK_THROWS_WITH(add(g, 2, "k/1.json", 1, ready), Catch::Contains("--group-window"));
}

TEST_CASE("SampleGrouper: input indexes are global for a --shard part") {
  GrouperOptions o = named(OnDuplicate::Error);
  o.first_input = 1;  // this part reads b.tar and c.tar
  SampleGrouper g(o);
  std::vector<RawSample> ready;
  add(g, 0, "k/1.jpg", 4, ready);
  g.flush(ready);
  CHECK(ready.at(0).input == 0);  // the reader's own index
  add(g, 1, "k/1.jpg", 4, ready);
  g.flush(ready);
  CHECK_THAT(ready.at(1).errors.at(0),
             Catch::Contains("of 'c.tar'") && Catch::Contains("from 'b.tar'"));
}

TEST_CASE("SampleGrouper: lent members still count in the window, and come back") {
  SampleGrouper g(100);
  std::vector<RawSample> ready;
  add(g, 0, "a.jpg", 40, ready);
  add(g, 0, "a.json", 10, ready);
  add(g, 0, "b.jpg", 30, ready);
  std::vector<Member> lent = g.lend_members("a");
  CHECK(names(RawSample{"a", 0, lent, {}, false, {}}) ==
        std::vector<std::string>{"a.jpg", "a.json"});
  REQUIRE(g.find_pending("a") != nullptr);
  CHECK(g.find_pending("a")->members.empty());
  CHECK(g.pending_bytes() == 80);  // the window counts what is lent
  CHECK(g.lend_members("zzz").empty());
  // A late member: the members come back first, then the sample grows as usual.
  g.return_members("a", std::move(lent));
  add(g, 0, "a.txt", 5, ready);
  CHECK(names(*g.find_pending("a")) == std::vector<std::string>{"a.jpg", "a.json", "a.txt"});
  CHECK(g.pending_bytes() == 85);
  // Lent again and released while lent: out without members, the window's bytes freed.
  lent = g.lend_members("a");
  add(g, 0, "c.jpg", 30, ready);  // 115 > 100: the oldest, a, leaves
  REQUIRE(keys(ready) == std::vector<std::string>{"a"});
  CHECK(ready[0].members.empty());
  CHECK(g.pending_bytes() == 60);
  CHECK(g.find_pending("a") == nullptr);
  g.return_members("a", std::move(lent));  // released: nothing to give back to, no effect
  CHECK(g.pending_bytes() == 60);
}
