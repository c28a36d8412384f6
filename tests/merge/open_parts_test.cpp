// The checks of lib/merge/open_parts.cpp that need no dataset: the options two parts must agree
// on, the first one that differs, and a --shard split complete and in order. Parts are built by
// hand (a path and a manifest); expected messages are written out.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "merge/merge_internal.h"

using namespace tarmac;
using namespace tarmac::merge_detail;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

// A part at `path` whose manifest records part index/count of a split by inputs of 3 inputs;
// count 0: a whole dataset (no "part").
std::unique_ptr<Part> split_part(const std::string& path, uint64_t index, uint64_t count,
                                 uint64_t all_inputs = 3) {
  auto p = std::make_unique<Part>();
  p->path = path;
  if (count > 0) p->manifest.part = format::ManifestPart{index, count, "inputs", all_inputs};
  return p;
}

template <typename... P>
std::vector<std::unique_ptr<Part>> parts_list(P... p) {
  std::vector<std::unique_ptr<Part>> v;
  (v.push_back(std::move(p)), ...);
  return v;
}

std::string split_refusal(const std::vector<std::unique_ptr<Part>>& parts) {
  try {
    check_split_complete(parts);
  } catch (const FatalError& e) {
    return e.what();
  }
  FAIL("check_split_complete accepted what it must refuse");
  return "";
}

}  // namespace

TEST_CASE("options_diff names the first option, in name order, that differs") {
  const json a = {{"--size", {32, 32}}, {"--format", "png"}};
  const json b = {{"--size", {48, 48}}, {"--format", "png"}};
  CHECK(options_diff(a, b) == "--size [32,32] in one, [48,48] in the other");
  // Two differ: "--format" sorts before "--size", whichever was written first.
  const json c = {{"--size", {48, 48}}, {"--format", "jpeg"}};
  CHECK(options_diff(a, c) == "--format \"png\" in one, \"jpeg\" in the other");
  // An option only one part was given.
  const json d = {{"--size", {32, 32}}, {"--format", "png"}, {"--dense", "npy"}};
  CHECK(options_diff(a, d) == "--dense not given in one, \"npy\" in the other");
  CHECK(options_diff(d, a) == "--dense \"npy\" in one, not given in the other");
}

TEST_CASE("options_diff is empty for the same options, and for --on-error alone") {
  const json a = {{"--size", {32, 32}}, {"--on-error", "stop"}};
  CHECK(options_diff(a, a).empty());
  CHECK(options_diff(a, {{"--size", {32, 32}}, {"--on-error", "skip"}}).empty());
  CHECK(options_diff(a, {{"--size", {32, 32}}}).empty());
  CHECK(options_diff(json::object(), json::object()).empty());
  // but not beside another difference
  CHECK(options_diff(a, {{"--size", {32, 33}}, {"--on-error", "skip"}}) ==
        "--size [32,32] in one, [32,33] in the other");
}

TEST_CASE("comparable_options: the output options, or the command line's less what not shapes") {
  format::Manifest typed;
  typed.options = {{"--size", {32, 32}}, {"--threads", 8}};
  typed.output_options = json{{"size", {32, 32}}, {"format", "png"}};
  CHECK(comparable_options(typed) == json{{"size", {32, 32}}, {"format", "png"}});
  format::Manifest old;  // written before output_options were recorded
  old.options = {{"inputs", {"a.tar"}}, {"--output", "o"}, {"--shard", "0/2"},
                 {"--overwrite", true}, {"threads", 4},    {"--threads", 4},
                 {"--size", {32, 32}}};
  CHECK(comparable_options(old) == json{{"--size", {32, 32}}});
  // Two manifests differing only by those: nothing to tell.
  format::Manifest old2 = old;
  old2.options["--output"] = "elsewhere";
  old2.options["--threads"] = 1;
  CHECK(options_diff(comparable_options(old), comparable_options(old2)).empty());
}

TEST_CASE("check_split_complete: whole datasets are no split; a whole split in order is") {
  CHECK_FALSE(check_split_complete(parts_list(split_part("x", 0, 0), split_part("y", 0, 0))));
  // "0/1" is a whole run too.
  CHECK_FALSE(check_split_complete(parts_list(split_part("x", 0, 1), split_part("y", 0, 0))));
  CHECK(check_split_complete(
      parts_list(split_part("p0", 0, 3), split_part("p1", 1, 3), split_part("p2", 2, 3))));
}

TEST_CASE("check_split_complete refuses a split short of a part, with one twice, out of order") {
  CHECK_THAT(split_refusal(parts_list(split_part("p0", 0, 3), split_part("p2", 2, 3))),
             Equals("the merge lacks part(s) 1/3 of the --shard split of 3 (given: 'p0' 0/3, 'p2' "
                    "2/3): without them the dataset would miss their samples. Convert the missing "
                    "part(s) (the same command with --shard I/3) and merge all 3"));
  CHECK_THAT(split_refusal(parts_list(split_part("p1", 1, 4), split_part("p3", 3, 4))),
             Contains("lacks part(s) 0/4, 2/4 of"));
  CHECK_THAT(split_refusal(parts_list(split_part("p0", 0, 3), split_part("p1", 1, 3),
                                      split_part("q1", 1, 3), split_part("p2", 2, 3))),
             Equals("part 1/3 is given twice: 'p1' and 'q1'; give each part once"));
  CHECK_THAT(split_refusal(parts_list(split_part("p2", 2, 3), split_part("p0", 0, 3),
                                      split_part("p1", 1, 3))),
             Equals("the parts of a --shard split are merged in their order, as one run orders "
                    "its samples (given: 'p2' 2/3, 'p0' 0/3, 'p1' 1/3); give them as: tarmac "
                    "merge p0 p1 p2 -o OUT"));
}

TEST_CASE("check_split_complete refuses parts of another split, a whole dataset among them") {
  // Another number of inputs: another conversion.
  CHECK_THAT(split_refusal(parts_list(split_part("p0", 0, 2), split_part("q1", 1, 2, 4))),
             Equals("part 'q1' is not a part of the --shard split that part 'p0' (0/2) belongs "
                    "to: parts of different conversions cannot be merged as one (given: 'p0' "
                    "0/2, 'q1' 1/2)"));
  CHECK_THAT(split_refusal(
                 parts_list(split_part("w", 0, 0), split_part("p0", 0, 2), split_part("p1", 1, 2))),
             Contains("part 'w' is not a part of the --shard split that part 'p0' (0/2)") &&
                 Contains("(given: 'w' (whole), 'p0' 0/2, 'p1' 1/2)"));
  CHECK_THAT(split_refusal(parts_list(split_part("p0", 0, 3), split_part("p5", 5, 3))),
             Equals("part 'p5' records part 5/3, which no split has; it is not a dataset "
                    "convert --shard wrote"));
}
