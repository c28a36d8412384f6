#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "labels/text_labels.h"

using tarmac::DType;
using tarmac::FieldValue;
using tarmac::ParseError;

namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

int64_t cls(const std::string& s) {
  const FieldValue v = tarmac::parse_cls(bytes_of(s));
  REQUIRE(v.dtype == DType::I64);
  REQUIRE(v.shape.empty());
  REQUIRE(v.data.size() == 8);
  int64_t out;
  std::memcpy(&out, v.data.data(), 8);
  return out;
}

}  // namespace

TEST_CASE("utf8: accepts well-formed text and rejects everything else") {
  for (const std::string& good :
       std::vector<std::string>{"", "abc", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                "\xF4\x8F\xBF\xBF", "\xEF\xBB\xBF", std::string("a\0b", 3)}) {
    INFO(good);
    CHECK(tarmac::is_valid_utf8(bytes_of(good)));
  }
  for (const std::string bad : {"\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80",
                                "\xF0\x80\x80\xAF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF",
                                "\xC3", "\xE2\x82", "\xF0\x9F\x98", "\xC3\x28", "\xE2\x28\xAC"}) {
    INFO(bad);
    CHECK_FALSE(tarmac::is_valid_utf8(bytes_of(bad)));
  }
}

TEST_CASE("txt: text is kept byte-exact except for a leading BOM") {
  const FieldValue v = tarmac::parse_txt(bytes_of("\xEF\xBB\xBF  h\xC3\xA9llo\r\n\n"));
  CHECK(v.kind == FieldValue::Kind::String);
  CHECK(v.dtype == DType::U8);
  CHECK(std::string(v.data.begin(), v.data.end()) == "  h\xC3\xA9llo\r\n\n");
  CHECK(v.shape == std::vector<int64_t>{static_cast<int64_t>(v.data.size())});
  CHECK(tarmac::parse_txt({}).data.empty());
  CHECK_THROWS_AS(tarmac::parse_txt(bytes_of("caf\xE9")), ParseError);
}

TEST_CASE("cls: one decimal integer with optional sign and whitespace") {
  CHECK(cls("3") == 3);
  CHECK(cls("  -17\n") == -17);
  CHECK(cls("+42\r\n") == 42);
  CHECK(cls("\xEF\xBB\xBF"
            "5\n") == 5);
  CHECK(cls("007") == 7);
  CHECK(cls("9223372036854775807") == INT64_MAX);
  CHECK(cls("-9223372036854775808") == INT64_MIN);
}

TEST_CASE("cls: anything else is refused") {
  for (const std::string& bad : std::vector<std::string>{
           "", " \n", "1.5", "12abc", "abc", "9223372036854775808", "-9223372036854775809", "1 2",
           "+", "-", "+-1", "++1", "--1", "0x10", "1e3", std::string("1\0", 2)}) {
    INFO(bad);
    CHECK_THROWS_AS(tarmac::parse_cls(bytes_of(bad)), ParseError);
  }
}
