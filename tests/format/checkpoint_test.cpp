#include "format/checkpoint.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "common/error.h"
#include "zlib_seal.h"

using json = nlohmann::ordered_json;
using namespace tarmac::format;
using Catch::Matchers::Contains;

namespace {

std::string sealed(json j) {
  return tarmac::test::zlib_sealed(std::move(j), "checkpoint_crc32", -1);
}

// A checkpoint as tarmac 0.1 wrote it (version 1), key by key: counts a list, the schema text.
json version_1() {
  const json schema = {{"samples", 7},
                       {"fields", {{{"name", "id"}, {"source", "json"}, {"kind", 0}}}}};
  return {
      {"tarmac_checkpoint", 1},
      {"run", {{"version", "0.1.0"}, {"part", {0, 1}}}},
      {"entries", 7},
      {"read",
       {{"input", 1}, {"bytes", 4096}, {"crc32", 123}, {"end", false}, {"done", {{40960, 77}}}}},
      {"writer",
       {{"samples", 7},
        {"blob_bytes", 2000},
        {"key_bytes", 28},
        {"shards", {"shard-000000.tar", "shard-000001.tar"}},
        {"shard_crcs", {11}},
        {"shard_sizes", {4096}},
        {"shard_samples", {4, 3}},
        {"open_shard", {{"size", 1536}, {"crc32", 99}}},
        {"spill", 2216},
        {"schema", schema.dump()}}},
      {"logs", {0, 10, 20}},
      {"counts", {1, 2, 3, 4, 5}}};
}

}  // namespace

TEST_CASE("checkpoint: version 1 is read, every value where it was") {
  const Checkpoint c = parse_checkpoint(sealed(version_1()));
  CHECK(c.version == 1);
  CHECK(c.run["version"] == "0.1.0");
  CHECK(c.entries == 7);
  REQUIRE(c.read);
  CHECK((c.read->input == 1 && c.read->bytes == 4096 && c.read->crc32 == 123 && !c.read->end));
  CHECK(c.read->done == std::vector<std::pair<uint64_t, uint32_t>>{{40960, 77}});
  CHECK(c.writer.samples == 7);
  CHECK(c.writer.blob_bytes == 2000);
  CHECK(c.writer.key_bytes == 28);
  CHECK(c.writer.shards == std::vector<std::string>{"shard-000000.tar", "shard-000001.tar"});
  CHECK(c.writer.shard_crcs == std::vector<uint32_t>{11});
  CHECK(c.writer.shard_sizes == std::vector<uint64_t>{4096});
  CHECK(c.writer.shard_samples == std::vector<uint64_t>{4, 3});
  REQUIRE(c.writer.open_shard);
  CHECK((c.writer.open_shard->size == 1536 && c.writer.open_shard->crc32 == 99));
  CHECK(c.writer.spill == 2216);
  CHECK(c.writer.schema["fields"][0]["name"] == "id");  // the text parsed into JSON
  CHECK(c.logs == std::array<uint64_t, 3>{0, 10, 20});
  CHECK(c.counts.skipped_samples == 1);
  CHECK(c.counts.ignored_members == 2);
  CHECK(c.counts.duplicates == 3);
  CHECK(c.counts.no_instance_samples == 4);
  CHECK(c.counts.duplicate_content_samples == 5);
  CHECK_FALSE(c.dedup);
}

TEST_CASE("checkpoint: the earliest version 1 (three counts, no seal) is read") {
  json j = version_1();
  j["counts"] = {6, 7, 8};
  const Checkpoint c = parse_checkpoint(j.dump());  // no checkpoint_crc32 at all
  CHECK(c.counts.skipped_samples == 6);
  CHECK(c.counts.duplicates == 8);
  CHECK(c.counts.no_instance_samples == 0);
  CHECK(c.counts.duplicate_content_samples == 0);
}

TEST_CASE("checkpoint: the writer writes version 2 with named counts and the schema as JSON") {
  Checkpoint c = parse_checkpoint(sealed(version_1()));
  c.dedup = 42;
  const std::string text = checkpoint_text(c);
  const json j = json::parse(text);
  CHECK(j["tarmac_checkpoint"] == kCheckpointCurrentVersion);
  CHECK(j["counts"] == json({{"skipped_samples", 1},
                             {"ignored_members", 2},
                             {"duplicates", 3},
                             {"no_instance_samples", 4},
                             {"duplicate_content_samples", 5}}));
  CHECK(j["writer"]["schema"].is_object());  // not a string inside the JSON
  CHECK(j["writer"]["schema"]["samples"] == 7);
  CHECK(j["dedup"] == 42);
  // Sealed as the independent computation seals it.
  json unsealed = j;
  unsealed.erase("checkpoint_crc32");
  CHECK(text == sealed(unsealed));
  // And read back whole.
  const Checkpoint back = parse_checkpoint(text);
  CHECK(back.version == 2);
  CHECK(back.writer.schema == c.writer.schema);
  CHECK(back.counts.duplicate_content_samples == 5);
  CHECK(back.read->done == c.read->done);
  CHECK(back.dedup == std::optional<uint64_t>(42));
  CHECK(checkpoint_text(back) == text);
  // No read position yet (a run stopped before its first entry): null, read back as none.
  Checkpoint empty;
  empty.run = json::object();
  empty.writer.schema = json::object();
  CHECK_FALSE(parse_checkpoint(checkpoint_text(empty)).read);
}

TEST_CASE("checkpoint: edited, unsealed, unknown or inconsistent ones are refused, saying why") {
  std::string text = sealed(version_1());
  text.replace(text.find("\"blob_bytes\":2000"), 17, "\"blob_bytes\":2001");
  CHECK_THROWS_WITH(parse_checkpoint(text), Contains("changed or damaged since the run wrote it"));

  Checkpoint c = parse_checkpoint(sealed(version_1()));
  json v2 = json::parse(checkpoint_text(c));
  v2.erase("checkpoint_crc32");
  CHECK_THROWS_WITH(parse_checkpoint(v2.dump()), Contains("it has no seal"));

  auto refused = [](const json& j, const std::string& why) {
    CHECK_THROWS_AS(parse_checkpoint(sealed(j)), tarmac::ParseError);
    CHECK_THROWS_WITH(parse_checkpoint(sealed(j)), Contains(why));
  };
  json j = version_1();
  j["tarmac_checkpoint"] = 3;
  refused(j, "unknown version 3 (this tarmac reads 1 to 2)");
  j = version_1();
  j["writer"].erase("shard_samples");
  refused(j, "written by an earlier tarmac (it lacks the samples per shard)");
  j = version_1();
  j["writer"]["shard_samples"] = {4};
  refused(j, "inconsistent (samples per shard)");
  j = version_1();
  j["writer"]["shard_sizes"] = {4096, 1536};  // the open shard given a size as if closed
  refused(j, "its shard names, sizes and CRC-32s disagree (2 names, 2 sizes, 1 CRC-32s, one open)");
  j = version_1();
  j["writer"].erase("spill");
  refused(j, "it has no 'writer.spill'");
  j = version_1();
  j["writer"]["samples"] = "seven";
  refused(j, "its 'writer.samples' is not a non-negative integer");
  // Found by fuzz_checkpoint: a float out of an integer's range was cast as it was (undefined
  // behaviour, UBSan's report: writer.shard_crcs), a negative count or an input past 2^32 wrapped.
  for (const auto& [at, value] :
       std::vector<std::pair<std::string, json>>{{"input", 4.24511e+47},
                                                 {"input", 1.5},
                                                 {"input", uint64_t{1} << 32},
                                                 {"bytes", -1},
                                                 {"crc32", 4294967296.0}}) {
    j = version_1();
    j["read"][at] = value;
    refused(j, "its 'read." + at + "' is not a non-negative integer in range");
  }
  j = version_1();
  j["writer"]["shard_crcs"] = {4.2451e+47};
  refused(j, "its 'writer.shard_crcs' is not a list of the right kind");
  j = version_1();
  j["read"]["done"] = {{40960, -77}};
  refused(j, "its 'read.done' is not a list of the right kind");
  j = version_1();
  j["counts"] = {1, 2, 3, 4};
  refused(j, "its 'counts' is not a list of 3 or 5 counts");
  j = version_1();
  j["writer"]["schema"] = "{not json";
  refused(j, "its 'writer.schema' is not JSON text");
  j = version_1();
  j["logs"] = {1, 2};
  refused(j, "its 'logs' is not 3 log lengths");
  j = version_1();
  j.erase("run");
  refused(j, "it has no 'run' object");
  CHECK_THROWS_WITH(parse_checkpoint("[1, 2]"), Contains("not a JSON object"));
  CHECK_THROWS_WITH(parse_checkpoint("{\"tarmac_checkpoint\": "), Contains("not JSON"));
}
