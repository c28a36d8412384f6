#include "format/manifest.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "zlib_seal.h"

using json = nlohmann::ordered_json;
using namespace tarmac::format;

namespace {

std::string zlib_seal(json j) {
  return tarmac::test::zlib_sealed(std::move(j), "manifest_crc32", 2);
}

// A manifest as convert wrote it key by key before the typed Manifest (every key, in its
// order), to check the typed writer byte for byte.
json run_manifest_json() {
  return json::parse(R"({
    "tool": {"name": "tarmac", "version": "0.3.0"},
    "command_line": ["tarmac", "convert", "in.tar", "-o", "out", "--shard", "1/2"],
    "options": {"inputs": "in.tar", "--output": "out", "threads": 2},
    "output_options": {"--size": [224, 224], "--points": ["kp"]},
    "inputs": [{"path": "in.tar", "size": 7168, "crc32": "04054333", "members": 6},
               {"path": "bad.tar", "size": 10, "crc32": "00000001", "members": 0,
                "error": "truncated"}],
    "table": {"path": "t.csv", "format": "csv", "bytes": 5, "crc32": "0badf00d", "rows": 2},
    "resumed": {"entries": 4, "samples": 3},
    "part": {"index": 1, "count": 2, "split": "samples", "all_inputs": 2},
    "counts": {"samples": 3, "skipped_samples": 1, "skipped_members": 1, "ignored_members": 2,
               "duplicates": 1, "no_instance_samples": 1, "duplicate_content_samples": 0,
               "unused_images": 1, "input_errors": 1, "shards": 2, "image_bytes": 108},
    "shards": [{"name": "shard-000000.tar", "size": 4096, "crc32": "ae76498e"},
               {"name": "shard-000001.tar", "size": 2048, "crc32": "0000abcd"}],
    "annotation": {"name": "labels.safetensors", "size": 1305},
    "labels_crc32": "cdf3885a",
    "schema": {"v": {"kind": "numeric", "dtype": "F32", "shape": [2], "ragged": false,
                     "source": "v.npy"}},
    "skipped": [{"input": "in.tar", "sample": "a", "code": "bad_image", "reason": "r"},
                {"input": "in.tar", "member": "b.jpg", "code": "member_too_large", "reason": "r"},
                {"input": "bad.tar", "archive": "bad.tar", "code": "input_error", "reason": "r"}],
    "ignored": [{"input": "in.tar", "member": "x.jpg", "code": "unused_image", "reason": "r"},
                {"input": "in.tar", "member": ".h", "code": "hidden_file", "reason": "r"},
                {"input": "in.tar", "sample": "k", "code": "no_instances", "reason": "r"}],
    "duplicates": [{"input": "in.tar", "sample": "d", "kept": "in.tar",
                    "code": "duplicate_key", "reason": "r"}],
    "columns": {"depth": {"size": 100, "values_crc32": "00000002", "offsets_crc32": "00000003",
                          "shapes_crc32": "00000004"}},
    "shard_list": {"name": "shardlist.json", "crc32": "12345678"}
  })");
}

}  // namespace

TEST_CASE("manifest counts: every entry written in format.md's order") {
  ManifestCounts c;
  c.samples = 10;
  c.image_bytes = 9;
  const json j = counts_json(c);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"samples", "skipped_samples", "skipped_members",
                                         "ignored_members", "duplicates", "no_instance_samples",
                                         "duplicate_content_samples", "unused_images",
                                         "input_errors", "shards", "image_bytes"});
  CHECK(j["samples"] == 10);
  CHECK(j["image_bytes"] == 9);
}

TEST_CASE("manifest: parsed into every typed key, written back byte for byte") {
  const json old = run_manifest_json();
  const std::string text = zlib_seal(old);
  const Manifest m = parse_manifest(text);
  CHECK(m.tool_version == "0.3.0");
  CHECK(m.command_line.size() == 7);
  CHECK(m.output_options->at("--size") == json::array({224, 224}));
  CHECK(m.inputs.size() == 2);
  CHECK(m.table->at("rows") == 2);
  CHECK(*m.resumed == ManifestResumed{4, 3});
  CHECK(*m.part == ManifestPart{1, 2, "samples", 2});
  CHECK(m.counts->samples == 3);
  CHECK(m.counts->unused_images == 1);
  CHECK(m.counts->image_bytes == 108);
  REQUIRE(m.shards->size() == 2);
  CHECK((*m.shards)[1] == ManifestShard{"shard-000001.tar", 2048, "0000abcd"});
  CHECK(*m.annotation == ManifestAnnotation{"labels.safetensors", 1305});
  CHECK(*m.labels_crc32 == "cdf3885a");
  CHECK(m.schema.contains("v"));
  CHECK(m.skipped.size() == 3);
  REQUIRE(m.column("depth"));
  CHECK(*m.column("depth") == ManifestColumn{100, "00000002", "00000003", "00000004"});
  CHECK(*m.shard_list == ManifestShardList{"shardlist.json", "12345678"});
  CHECK(m.unknown.empty());
  CHECK(count_problems(m).empty());
  CHECK(sealed_manifest_text(m) == text);
  CHECK(manifest_shard_names(m) ==
        std::vector<std::string>{"shard-000000.tar", "shard-000001.tar"});
}

TEST_CASE("manifest: merge's keys (merged_from, no part) and an absent output_options") {
  json old = run_manifest_json();
  old.erase("part");
  old.erase("resumed");
  old.erase("output_options");
  json merged = json::object();
  for (auto it = old.begin(); it != old.end(); ++it) {
    if (it.key() == "inputs")
      merged["merged_from"] = json::array({{{"path", "p0"},
                                            {"samples", 3},
                                            {"shards", 2},
                                            {"labels_crc32", "cdf3885a"},
                                            {"part", nullptr},
                                            {"inputs", json::array()}}});
    merged[it.key()] = it.value();
  }
  const std::string text = zlib_seal(merged);
  const Manifest m = parse_manifest(text);
  CHECK(!m.output_options);
  CHECK(!m.part);
  CHECK(m.merged_from->size() == 1);
  CHECK(sealed_manifest_text(m) == text);
}

TEST_CASE("manifest: unknown keys are kept and written after the known ones") {
  json j = run_manifest_json();
  j["later_key"] = {{"a", 1}};
  json k = json::object();
  k["zeta"] = 1;  // a key this version does not know, first in the file
  for (auto it = j.begin(); it != j.end(); ++it) k[it.key()] = it.value();
  const Manifest m = parse_manifest(zlib_seal(k));
  CHECK(m.unknown == json({{"zeta", 1}, {"later_key", {{"a", 1}}}}));
  const json back = json::parse(sealed_manifest_text(m));
  std::vector<std::string> keys;
  for (const auto& [key, v] : back.items()) keys.push_back(key);
  REQUIRE(keys.size() >= 3);
  CHECK(keys[keys.size() - 3] == "zeta");
  CHECK(keys[keys.size() - 2] == "later_key");
  CHECK(keys.back() == "manifest_crc32");
}

TEST_CASE("manifest: an older manifest's absent keys and count entries") {
  std::ifstream in(std::string(TARMAC_TEST_DATA) + "/datasets/raw3/manifest.json");
  std::stringstream text;
  text << in.rdbuf();
  const Manifest m = parse_manifest(text.str());
  CHECK(!m.columns);  // written before columns were recorded
  CHECK(!m.shard_list);
  CHECK(!m.output_options);
  CHECK(m.counts->samples == 3);
  CHECK(m.counts->no_instance_samples == 0);  // absent: written before the entry existed
  CHECK(m.counts->image_bytes == 108);
  CHECK(check_seal(text.str()).state == ManifestSeal::State::Good);
  CHECK(check_seal(text.str()).said == "4829f1ea");
}

TEST_CASE("manifest: a wrong type is a ParseError naming the key") {
  const std::vector<std::pair<std::string, json>> cases = {
      {"counts.duplicates", {{"counts", {{"samples", 3}, {"duplicates", -1}}}}},
      {"counts.shards", {{"counts", {{"shards", "2"}}}}},
      {"counts", {{"counts", json::array()}}},
      {"shards", {{"shards", {{"name", "x"}}}}},
      {"shards.size", {{"shards", {{{"name", "shard-000000.tar"}, {"size", "1"}}}}}},
      {"labels_crc32", {{"labels_crc32", 5}}},
      {"annotation.size", {{"annotation", {{"name", "labels.safetensors"}, {"size", 1.5}}}}},
      {"skipped", {{"skipped", json::array({"a"})}}},
      {"command_line", {{"command_line", json::array({1})}}},
      {"part.split", {{"part", {{"index", 0}, {"count", 2}, {"split", 1}}}}},
      {"columns.c.size", {{"columns", {{"c", {{"size", "1"}}}}}}},
      {"shard_list", {{"shard_list", {{"name", "shardlist.json"}}}}},
      {"schema", {{"schema", json::array()}}},
  };
  for (const auto& [key, j] : cases) {
    INFO(j.dump());
    try {
      (void)parse_manifest(j.dump());
      FAIL("parsed");
    } catch (const tarmac::ParseError& e) {
      CHECK(std::string(e.what()).find("\"" + key + "\"") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(parse_manifest("[1]"), tarmac::ParseError);
  CHECK_THROWS_AS(parse_manifest("{\"counts\": "), tarmac::ParseError);
}

TEST_CASE("manifest shard names: plain shard names only, never a path") {
  for (const char* bad :
       {R"({"shards": [{"name": "../victim.txt"}]})", R"({"shards": [{"name": "/etc/passwd"}]})",
        R"({"shards": [{"name": "sub/shard-000000.tar"}]})", R"({"shards": [{"size": 3}]})",
        R"({"shards": {"name": "x"}})"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_manifest(bad), tarmac::ParseError);
  }
  CHECK(manifest_shard_names(parse_manifest("{}")).empty());
}

TEST_CASE("manifest counts add up to the lists, or each disagreement is named") {
  Manifest m = parse_manifest(run_manifest_json().dump());
  // By hand from run_manifest_json's lists: skipped holds 1 sample, 1 member, 1 archive;
  // ignored 2 members (1 an unused image) and 1 sample; 1 duplicate; 2 shards.
  const ManifestCounts c = counts_from_lists(m, 7, 99);
  CHECK(c == ManifestCounts{7, 1, 1, 2, 1, 1, 0, 1, 1, 2, 99});
  m.counts->duplicates = 3;
  m.counts->shards = 1;
  const auto problems = count_problems(m);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "counts.duplicates is 3 but \"duplicates\" lists 1");
  CHECK(problems[1] == "counts.shards is 1 but \"shards\" lists 2");
  CHECK_THROWS_AS(sealed_manifest_text(m), tarmac::InternalError);
  m.counts.reset();  // a manifest without counts claims nothing
  CHECK(count_problems(m).empty());
}

TEST_CASE("manifest counts: an entry's code of any type is only not an unused image's") {
  const Manifest m = parse_manifest(R"({"counts": {"ignored_members": 2, "unused_images": 1},
      "ignored": [{"member": "a", "code": 5}, {"member": "b", "code": "unused_image"}]})");
  CHECK(count_problems(m).empty());
}

TEST_CASE("manifest counts: samples left out by --dedup are not samples without instances") {
  Manifest m = parse_manifest(R"({"counts": {"no_instance_samples": 1,
      "duplicate_content_samples": 2},
      "ignored": [{"sample": "a", "code": "duplicate_content", "duplicate_of": "k", "distance": 0},
                  {"sample": "b", "code": "no_instances"},
                  {"sample": "c", "code": "duplicate_content", "duplicate_of": "k", "distance": 3}]})");
  CHECK(m.counts->duplicate_content_samples == 2);
  CHECK(count_problems(m).empty());
  m.counts->duplicate_content_samples = 3;
  const auto problems = count_problems(m);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "counts.duplicate_content_samples is 3 but \"ignored\" lists duplicate_content samples: 2");
}

TEST_CASE("manifest seal: missing, malformed, wrong, good") {
  const std::string good = zlib_seal(json{{"a", 1}});
  CHECK(check_seal(good).state == ManifestSeal::State::Good);
  std::string changed = good;
  changed.replace(changed.find("1"), 1, "2");
  const ManifestSeal wrong = check_seal(changed);
  CHECK(wrong.state == ManifestSeal::State::Wrong);
  CHECK(wrong.said == check_seal(good).said);
  CHECK(wrong.computed ==
        zlib_seal(json{{"a", 2}}).substr(zlib_seal(json{{"a", 2}}).rfind(": \"") + 3, 8));
  CHECK(check_seal("{\"a\": 1}").state == ManifestSeal::State::Missing);
  CHECK(check_seal("{\"manifest_crc32\": \"12\"}").state == ManifestSeal::State::Malformed);
}

TEST_CASE("manifest columns: recorded, replaced, removed in their order") {
  Manifest m;
  CHECK(!m.column("a"));
  m.set_column("b", ManifestColumn{1, "1", "2", "3"});
  m.set_column("a", ManifestColumn{2, "4", "5", "6"});
  m.set_column("b", ManifestColumn{3, "7", "8", "9"});
  REQUIRE(m.columns->size() == 2);
  CHECK(m.columns->at(0).first == "b");
  CHECK(m.column("b")->size == 3);
  m.set_column("b", std::nullopt);
  CHECK(!m.column("b"));
  CHECK(m.column("a")->size == 2);
  const json j = to_json(m);
  CHECK(
      j["columns"] ==
      json(
          {{"a",
            {{"size", 2}, {"values_crc32", "4"}, {"offsets_crc32", "5"}, {"shapes_crc32", "6"}}}}));
}
