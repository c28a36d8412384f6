#include "convert/sample_feed.h"
#include "convert/stage_specs.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "write/tar_writer.h"

using namespace tarmac;
namespace fs = std::filesystem;

namespace {

// An archive of `n` samples k/NN (a 40 KiB .bin image stand-in and a .json), plus a hidden
// file and a name without an extension.
std::string archive(const std::string& name, int n) {
  const fs::path dir =
      fs::temp_directory_path() / ("tarmac-feed-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  TarWriter w(path);
  for (int k = 0; k < n; ++k) {
    char key[16];
    std::snprintf(key, sizeof key, "k/%02d", k);
    w.add(std::string(key) + ".jpg", std::vector<uint8_t>(40 << 10, static_cast<uint8_t>(k)));
    const std::string js = "{\"id\": " + std::to_string(k) + "}";
    w.add(std::string(key) + ".json", {reinterpret_cast<const uint8_t*>(js.data()), js.size()});
  }
  w.add(".DS_Store", std::vector<uint8_t>(3, 0));
  w.add("README", std::vector<uint8_t>(3, 0));
  w.finish();
  return path;
}

struct Fed {
  std::vector<std::string> keys;
  std::vector<bool> replay;
  std::vector<size_t> members;  // members an entry carries (0 for a replay; ahead: in the job)
  std::vector<uint64_t> seqs;
  size_t ahead = 0;  // entries whose sample went ahead
};

// Runs a feed on its own thread and takes every entry in order, as the workers and the writer
// would (ahead jobs are left to the entries that carry them).
Fed feed_all(const ConvertOptions& o, PartSplit split, uint64_t resume_entries, bool ahead) {
  InputReader reader(o.source.inputs, {});
  Pipeline pipe(64);
  GrouperOptions g;
  g.window_bytes = o.limits.group_window;
  g.input_names = o.source.inputs;
  SampleFeed feed(feed_spec(o), split, g, resume_entries, ahead, reader, pipe);
  std::thread t([&] { feed.run(); });
  Fed fed;
  while (auto w = pipe.take()) {
    if (!w->item) continue;  // a job ahead: its entry takes it later
    fed.seqs.push_back(w->item->seq);
    for (Entry& e : w->item->entries) {
      fed.keys.push_back(e.raw.key);
      fed.replay.push_back(e.replay);
      fed.members.push_back(e.ahead ? 2 : e.raw.members.size());
      fed.ahead += e.ahead ? 1 : 0;
    }
  }
  t.join();
  REQUIRE_FALSE(feed.failure());
  CHECK(feed.entries_read() == fed.keys.size());
  CHECK(feed.notices().size() == 2);  // .DS_Store and README, every time
  return fed;
}

}  // namespace

TEST_CASE("the feed groups members into samples, in order, in numbered batches") {
  ConvertOptions o;
  o.source.inputs = {archive("a.tar", 70)};
  const Fed fed = feed_all(o, PartSplit::None, 0, false);
  REQUIRE(fed.keys.size() == 70);
  for (size_t k = 0; k < 70; ++k) {
    char key[16];
    std::snprintf(key, sizeof key, "k/%02zu", k);
    CHECK(fed.keys[k] == key);
    CHECK(fed.members[k] == 2);
    CHECK_FALSE(fed.replay[k]);
  }
  for (size_t i = 0; i < fed.seqs.size(); ++i) CHECK(fed.seqs[i] == i);
  CHECK(fed.seqs.size() > 1);  // 1 MiB batches of 40 KiB samples
}

TEST_CASE("the feed replays what a resumed run had handled, without its members") {
  ConvertOptions o;
  o.source.inputs = {archive("b.tar", 10)};
  const Fed fed = feed_all(o, PartSplit::None, 4, false);
  REQUIRE(fed.keys.size() == 10);
  for (size_t k = 0; k < 10; ++k) {
    CHECK(fed.replay[k] == (k < 4));
    CHECK(fed.members[k] == (k < 4 ? 0u : 2u));
  }
}

TEST_CASE("--shard I/N by sample: each part gets every N-th sample, together all of them") {
  ConvertOptions o;
  o.source.inputs = {archive("c.tar", 11)};
  o.part.count = 3;
  std::vector<std::string> all;
  for (uint32_t part = 0; part < 3; ++part) {
    o.part.index = part;
    const Fed fed = feed_all(o, PartSplit::Samples, 0, false);
    for (size_t j = 0; j < fed.keys.size(); ++j) {
      char key[16];
      std::snprintf(key, sizeof key, "k/%02zu", part + 3 * j);
      CHECK(fed.keys[j] == key);
    }
    all.insert(all.end(), fed.keys.begin(), fed.keys.end());
  }
  CHECK(all.size() == 11);
}

TEST_CASE("samples go ahead while the window fills; the entries carry their jobs") {
  ConvertOptions o;
  o.source.inputs = {archive("d.tar", 8)};  // 320 KiB: all of it fits in the 64 MiB window
  const Fed fed = feed_all(o, PartSplit::None, 0, true);
  REQUIRE(fed.keys.size() == 8);
  for (size_t k = 0; k < 8; ++k) CHECK(fed.members[k] == 2);
  CHECK(fed.ahead == 7);  // each sample that another key followed; the last one was not
  ConvertOptions same = o;
  CHECK(feed_all(same, PartSplit::None, 0, false).ahead == 0);  // off: nothing goes ahead
}
