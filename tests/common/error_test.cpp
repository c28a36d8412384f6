#include "common/error.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using namespace tarmac;

TEST_CASE("error codes have unique, stable snake_case names") {
  std::set<std::string> seen;
  for (size_t k = 0; k < kNumErrorCodes; ++k) {
    const std::string name(error_code_name(static_cast<ErrorCode>(k)));
    INFO(k << " " << name);
    CHECK(seen.insert(name).second);
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
  }
  // The names users filter manifests by: changing one breaks their scripts.
  CHECK(error_code_name(ErrorCode::NoImage) == "no_image");
  CHECK(error_code_name(ErrorCode::BadJson) == "bad_json");
  CHECK(error_code_name(ErrorCode::DuplicateKey) == "duplicate_key");
  CHECK(error_code_name(ErrorCode::SecondImage) == "second_image");
  CHECK(error_code_name(ErrorCode::AmbiguousImage) == "ambiguous_image");
}

TEST_CASE("a sample error carries its code") {
  CHECK(SampleError("x").code() == ErrorCode::BadSample);
  CHECK(SampleError("late", ErrorCode::LateMember).code() == ErrorCode::LateMember);
}
