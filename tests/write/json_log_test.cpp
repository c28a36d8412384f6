#include "write/json_log.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "test_util.h"

using tarmac::JsonLog;
using tarmac::test::TempDir;
using json = nlohmann::ordered_json;

TEST_CASE("json log: records come back in order, one JSON document a line") {
  TempDir dir;
  JsonLog log(dir.file("skipped.jsonl"), std::nullopt);
  for (int i = 0; i < 3000; ++i)  // more than one 64 KiB buffer
    log.add({{"sample", "s/" + std::to_string(i)}, {"reason", "bad \"json\"\n"}});
  const json all = log.read_all();
  REQUIRE(all.size() == 3000);
  CHECK(all[2999]["sample"] == "s/2999");
  CHECK(all[0]["reason"] == "bad \"json\"\n");
  std::ifstream f(dir.file("skipped.jsonl"));
  std::string first;
  std::getline(f, first);
  CHECK(json::parse(first)["sample"] == "s/0");
}

TEST_CASE("json log: resuming cuts back to the checkpoint and goes on from there") {
  TempDir dir;
  uint64_t mark = 0;
  {
    JsonLog log(dir.file("l.jsonl"), std::nullopt);
    log.add({{"n", 1}});
    log.add({{"n", 2}});
    mark = log.checkpoint();
    log.add({{"n", 3}});  // after the checkpoint: lost with the interrupted run
    log.checkpoint();
  }
  JsonLog resumed(dir.file("l.jsonl"), mark);
  resumed.add({{"n", 4}});
  const json all = resumed.read_all();
  REQUIRE(all.size() == 3);
  CHECK(all[0]["n"] == 1);
  CHECK(all[1]["n"] == 2);
  CHECK(all[2]["n"] == 4);
}
