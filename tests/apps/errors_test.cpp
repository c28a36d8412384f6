#include "apps/errors.h"

#include <catch2/catch.hpp>

using namespace tarmac::cli;

TEST_CASE("edit_distance: Levenshtein") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("convert", "convert") == 0);
  CHECK(edit_distance("covnert", "convert") == 2);  // a swap is two edits
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("--szie", "--size") == 2);
  CHECK(edit_distance("abc", "") == 3);
}

TEST_CASE("closest_name: near enough to be a typo, else nothing") {
  const std::vector<std::string> commands = {"convert", "info", "verify", "cat", "ls", "merge"};
  CHECK(closest_name("covnert", commands) == "convert");
  CHECK(closest_name("verfiy", commands) == "verify");
  CHECK(closest_name("inf", commands) == "info");
  CHECK(closest_name("frobnicate", commands).empty());
  CHECK(closest_name("xy", commands).empty());
  const std::vector<std::string> options = {"--size", "--crop", "--resize", "--output", "-o"};
  CHECK(closest_name("--szie", options) == "--size");
  CHECK(closest_name("--outptu", options) == "--output");
}
