#include "merge/merge.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include <unistd.h>

#include "../check/part_fixture.h"
#include "check/annotation.h"
#include "check/verify.h"
#include "common/error.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tarmac;
using Catch::Matchers::Contains;

namespace {

fs::path temp_dir(const std::string& name) {
  return test::temp_dir("merge", name);
}

check::Annotation open(const std::string& dir) {
  check::Annotation a;
  std::vector<check::Problem> problems;
  REQUIRE(a.open(dir, true, problems));
  REQUIRE(problems.empty());
  return a;
}

const FieldSpec& field(const check::Annotation& a, const std::string& name) {
  for (const auto& f : a.fields())
    if (f.spec.name == name) return f.spec;
  FAIL("no field " << name);
  throw;
}

}  // namespace

TEST_CASE("merge concatenates parts, renumbers shards and verifies") {
  const fs::path root = temp_dir("basic");
  const std::string a = testing::copy_part(root, "a", "a");
  const std::string b = testing::copy_part(root, "b", "b");  // float scores
  MergeOptions o;
  o.parts = {a, b};
  o.output = (root / "out").string();
  const MergeResult r = merge_datasets(o);
  CHECK(r.samples == 9);
  CHECK(r.linked == r.shards);
  const auto m = open(o.output);
  CHECK(m.key(0) == "a/000");
  CHECK(m.key(5) == "b/000");
  CHECK(m.shards().size() == open(a).shards().size() + open(b).shards().size());
  CHECK(field(m, "score").dtype == DType::F64);  // I64 in a, F64 in b: promoted
  CHECK(m.labels_json(6)["score"] == 1.5);
  CHECK(m.labels_json(2)["pts"].size() == 3);
  check::VerifyOptions v;
  v.dir = o.output;
  const auto report = check::verify_dataset(v, nullptr);
  INFO((report.problems.empty() ? "" : report.problems[0].file + ": " + report.problems[0].what));
  CHECK(report.ok());
  CHECK_FALSE(fs::exists(fs::path(o.output) / ".tarmac-partial"));
}

TEST_CASE("a fixed field of different lengths across parts becomes ragged") {
  const fs::path root = temp_dir("ragged");
  // "pts" is fixed [1, 2] in part a1 (one sample) and ragged in b2 (1 and 2 points).
  const std::string a = testing::copy_part(root / "x", "a", "a1");
  const std::string b = testing::copy_part(root / "y", "b", "b2");
  CHECK_FALSE(field(open(a), "pts").ragged);
  MergeOptions o;
  o.parts = {a, b};
  o.output = (root / "out").string();
  merge_datasets(o);
  const auto m = open(o.output);
  CHECK(field(m, "pts").ragged);
  CHECK(m.labels_json(0)["pts"].size() == 1);
  CHECK(m.labels_json(2)["pts"].size() == 2);
}

TEST_CASE("merge refuses duplicate keys, other schemas and other blob kinds") {
  const fs::path root = temp_dir("errors");
  const std::string a = testing::copy_part(root / "1", "a", "k1");
  const std::string b = testing::copy_part(root / "2", "b", "k2");
  const std::string labels_only = testing::copy_part(root / "3", "c", "c");
  MergeOptions o;
  o.output = (root / "out").string();
  o.parts = {a, b};
  CHECK_THROWS_WITH(merge_datasets(o), Contains("key 'k/00") && Contains(a) && Contains(b));
  CHECK_FALSE(fs::exists(o.output + "/labels.safetensors"));
  o.parts = {a, labels_only};
  CHECK_THROWS_WITH(merge_datasets(o), Contains("stores different blobs"));
  o.parts = {a, root.string()};
  CHECK_THROWS_AS(merge_datasets(o), FatalError);
}

TEST_CASE("labels-only parts merge") {
  const fs::path root = temp_dir("labels");
  MergeOptions o;
  o.parts = {testing::copy_part(root, "a", "la"), testing::copy_part(root, "b", "lb")};
  o.output = (root / "out").string();
  CHECK(merge_datasets(o).samples == 5);
  CHECK(open(o.output).blob_kinds().empty());
}

TEST_CASE(
    "a stop request ends a merge with Interrupted and no dataset; a dead merge's staging "
    "does not block the next") {
  const fs::path root = temp_dir("stopped");
  const std::string a = testing::copy_part(root, "a", "a");
  const std::string b = testing::copy_part(root, "b", "b");
  StopRequest stop;
  stop.request(15);
  MergeOptions o;
  o.parts = {a, b};
  o.output = (root / "out").string();
  o.stop = &stop;
  try {
    merge_datasets(o);
    FAIL("a stop request must end the merge");
  } catch (const Interrupted& e) {
    CHECK(e.signal() == 15);
    CHECK_THAT(e.what(), Contains("stopped by SIGTERM"));
  }
  CHECK(fs::is_empty(o.output));  // no dataset, no staging, no lock file
  // What a killed merge leaves (a staging directory without a checkpoint) is not in the way.
  fs::create_directories(fs::path(o.output) / ".tarmac-partial");
  o.stop = nullptr;
  CHECK(merge_datasets(o).samples == 9);
  CHECK_FALSE(fs::exists(fs::path(o.output) / ".tarmac-partial"));
  CHECK_FALSE(fs::exists(fs::path(o.output) / ".tarmac-lock"));
}
