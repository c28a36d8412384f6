#include "apps/errors.h"

#include <catch2/catch.hpp>
#include <stdexcept>

#include "apps/commands.h"
#include "common/error.h"

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

TEST_CASE("error_exit_code: the library's UsageError is a usage error (2), the rest data (1)") {
  CHECK(error_exit_code(tarmac::UsageError("--shard 2/2: ...")) == kUsageError);
  CHECK(error_exit_code(tarmac::FatalError("cannot read 'x.tar'")) == kDataError);
  CHECK(error_exit_code(std::runtime_error("out of memory")) == kDataError);
  const tarmac::FatalError& as_fatal = tarmac::UsageError("seen through its base");
  CHECK(error_exit_code(as_fatal) == kUsageError);
}
