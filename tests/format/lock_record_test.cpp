#include "format/lock_record.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"

using namespace tarmac::format;

TEST_CASE("lock record: one JSON line, read back, described; -o s3:// adds the run") {
  const LockRecord here = this_process_lock_record("tarmac convert a.tar -o out");
  CHECK(here.pid == static_cast<long long>(::getpid()));
  CHECK(here.started.size() == 20);  // 2026-12-02T19:20:00Z
  CHECK(here.started.back() == 'Z');
  const std::string text = lock_record_text(here);
  CHECK(text.back() == '\n');
  const auto j = nlohmann::ordered_json::parse(text);  // the keys an older tarmac wrote, in order
  CHECK(j.dump() == nlohmann::ordered_json({{"pid", here.pid},
                                            {"host", here.host},
                                            {"started", here.started},
                                            {"command", "tarmac convert a.tar -o out"}})
                        .dump());
  const LockRecord back = parse_lock_record(text);
  CHECK(back.run.empty());
  CHECK(holder_description(back) == "pid " + std::to_string(::getpid()) + " on host " + here.host +
                                        ", since " + here.started +
                                        ", running: tarmac convert a.tar -o out");
  const LockRecord remote = parse_lock_record(lock_record_text({"r-1", 7, "h", "t", "c"}));
  CHECK(remote.run == "r-1");
  CHECK(nlohmann::ordered_json::parse(lock_record_text(remote)).begin().key() == "run");
  CHECK_THROWS_AS(parse_lock_record(""), tarmac::ParseError);
  CHECK_THROWS_AS(parse_lock_record("{\"pid\": 1, \"host\": \"h\"}"), tarmac::ParseError);
  CHECK_THROWS_AS(parse_lock_record("{\"pid\": \"x\", \"host\": \"h\", \"started\": \"s\", "
                                    "\"command\": \"c\"}"),
                  tarmac::ParseError);
}
