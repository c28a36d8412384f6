#include "format/manifest.h"

#include <catch2/catch.hpp>

#include "common/error.h"

using json = nlohmann::ordered_json;
using namespace tarmac::format;

TEST_CASE("manifest counts: every entry written in format.md's order, read back") {
  ManifestCounts c;
  c.samples = 10;
  c.skipped_samples = 1;
  c.skipped_members = 2;
  c.ignored_members = 3;
  c.duplicates = 4;
  c.no_instance_samples = 5;
  c.unused_images = 6;
  c.input_errors = 7;
  c.shards = 8;
  c.image_bytes = 9;
  const json j = counts_json(c);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"samples", "skipped_samples", "skipped_members",
                                         "ignored_members", "duplicates", "no_instance_samples",
                                         "unused_images", "input_errors", "shards", "image_bytes"});
  const ManifestCounts back = counts_of(json{{"counts", j}});
  CHECK(back.no_instance_samples == 5);
  CHECK(back.unused_images == 6);
  CHECK(back.image_bytes == 9);
}

TEST_CASE("manifest counts: absent, negative or textual entries read as 0") {
  const ManifestCounts c =
      counts_of(json::parse(R"({"counts": {"samples": 3, "duplicates": -1, "shards": "2"}})"));
  CHECK(c.samples == 3);
  CHECK(c.duplicates == 0);
  CHECK(c.shards == 0);
  CHECK(c.unused_images == 0);
  CHECK(counts_of(json::array()).samples == 0);
}

TEST_CASE("manifest shard names: plain shard names only, never a path") {
  CHECK(manifest_shard_names(json::parse(
            R"({"shards": [{"name": "shard-000000.tar"}, {"name": "shard-000001.tar"}]})")) ==
        std::vector<std::string>{"shard-000000.tar", "shard-000001.tar"});
  CHECK(manifest_shard_names(json::object()).empty());
  for (const char* bad :
       {R"({"shards": [{"name": "../victim.txt"}]})", R"({"shards": [{"name": "/etc/passwd"}]})",
        R"({"shards": [{"name": "sub/shard-000000.tar"}]})", R"({"shards": [{"size": 3}]})",
        R"({"shards": {"name": "x"}})"}) {
    INFO(bad);
    CHECK_THROWS_AS(manifest_shard_names(json::parse(bad)), tarmac::ParseError);
  }
}
