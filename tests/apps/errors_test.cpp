#include "apps/errors.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <stdexcept>

#include "apps/commands.h"
#include "common/error.h"
#include "common/stop.h"

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

TEST_CASE("error_exit_code: one mapping by grade: usage 2, a signal 128 + N, the rest 1") {
  CHECK(error_exit_code(tarmac::UsageError("--shard 2/2: ...")) == kUsageError);
  CHECK(error_exit_code(tarmac::ArgumentError("no field 'x'")) == kUsageError);
  CHECK(error_exit_code(tarmac::IndexError("sample 9 of 3")) == kUsageError);
  CHECK(error_exit_code(tarmac::FatalError("cannot read 'x.tar'")) == kDataError);
  CHECK(error_exit_code(tarmac::SampleError("'a.tar': 'k': no image")) == kDataError);
  CHECK(error_exit_code(tarmac::ParseError("bad header")) == kDataError);
  CHECK(error_exit_code(tarmac::InternalError("a broken invariant")) == kDataError);
  CHECK(error_exit_code(tarmac::Interrupted(SIGTERM)) == 128 + SIGTERM);
  CHECK(error_exit_code(tarmac::Interrupted(SIGINT)) == 128 + SIGINT);
  CHECK(error_exit_code(std::runtime_error("out of memory")) == kDataError);
  CHECK(error_exit_code(std::invalid_argument("a precondition")) == kDataError);
  const tarmac::FatalError& as_fatal = tarmac::UsageError("seen through its base");
  CHECK(error_exit_code(as_fatal) == kUsageError);
  const tarmac::FatalError& stop = tarmac::Interrupted(SIGTERM);
  CHECK(error_exit_code(stop) == 128 + SIGTERM);
}

TEST_CASE("every exception tarmac throws is a tarmac::Error with its grade") {
  using tarmac::Grade;
  CHECK(tarmac::grade_of(tarmac::SampleError("x")) == Grade::Sample);
  CHECK(tarmac::grade_of(tarmac::FatalError("x")) == Grade::Fatal);
  CHECK(tarmac::grade_of(tarmac::UsageError("x")) == Grade::Usage);
  CHECK(tarmac::grade_of(tarmac::InternalError("x")) == Grade::Internal);
  CHECK(tarmac::grade_of(tarmac::Interrupted(SIGINT)) == Grade::Interrupted);
  CHECK(tarmac::grade_of(std::logic_error("x")) == Grade::Internal);
  CHECK(tarmac::grade_of(std::runtime_error("x")) == Grade::Fatal);
  CHECK(tarmac::SampleError("x", tarmac::ErrorCode::BadJson).code() == tarmac::ErrorCode::BadJson);
  CHECK(tarmac::Interrupted(SIGTERM).signal() == SIGTERM);
  CHECK(tarmac::FatalError("x").signal() == 0);
  // One root, and none of the standard library's logic_error family (c_api.cpp catches by name).
  auto root_of = [](const std::exception& e) {
    return dynamic_cast<const tarmac::Error*>(&e) != nullptr &&
           dynamic_cast<const std::logic_error*>(&e) == nullptr;
  };
  CHECK(root_of(tarmac::ArgumentError("x")));
  CHECK(root_of(tarmac::IndexError("x")));
  CHECK(root_of(tarmac::ParseError("x")));
  CHECK(root_of(tarmac::UsageError("x")));
  CHECK(tarmac::grade_name(Grade::Interrupted) == "interrupted");
  CHECK(tarmac::grade_name(Grade::Sample) == "sample");
}
