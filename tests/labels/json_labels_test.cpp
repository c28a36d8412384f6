#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/json_labels.h"
#include "support/values.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::Fields;
using tarmac::FieldValue;
using tarmac::ParseError;
using tarmac::test::text_of;
using tarmac::test::values_of;
using Kind = FieldValue::Kind;

namespace {

Fields parse(const std::string& text, const std::string& prefix = "",
             const std::string& top = "json") {
  return tarmac::parse_json_labels({reinterpret_cast<const uint8_t*>(text.data()), text.size()},
                                   prefix, top);
}

std::vector<std::string> names(const Fields& fields) {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.first);
  return out;
}

}  // namespace

TEST_CASE("json: top-level members become fields in document order, nested objects flattened") {
  const Fields f = parse(R"({"z": 1, "a": {"b": 2, "c": {"d": true}}, "e": {}, "m": null})", "p.");
  CHECK(names(f) == std::vector<std::string>{"p.z", "p.a.b", "p.a.c.d", "p.e", "p.m"});
  CHECK(f[3].second.kind == Kind::Json);
  CHECK(text_of(f[3].second) == "{}");
  // "m": null names the field but gives it no value (the schema makes it nullable).
  CHECK(f[4].second.null);
  CHECK(f[4].second.data.empty());
  CHECK_FALSE(f[3].second.null);
}

TEST_CASE("json: null, at the top or nested, is a field without a value") {
  const Fields top = parse("null");
  REQUIRE(top.size() == 1);
  CHECK(top[0].second.null);
  const Fields nested = parse(R"({"a": {"b": null, "c": 1}})");
  CHECK(names(nested) == std::vector<std::string>{"a.b", "a.c"});
  CHECK(nested[0].second.null);
  CHECK_FALSE(nested[1].second.null);
}

TEST_CASE("json: an empty top-level object has no fields") {
  CHECK(parse("{}").empty());
}

TEST_CASE("json: a top-level non-object is one field named top_level_name") {
  const Fields f = parse("[1, 2, 3]", "p.", "label");
  REQUIRE(f.size() == 1);
  CHECK(f[0].first == "label");
  CHECK(f[0].second.dtype == DType::I64);
  CHECK(values_of<int64_t>(f[0].second) == std::vector<int64_t>{1, 2, 3});
  CHECK(parse("\"cat\"", "", "cls")[0].second.kind == Kind::String);
  CHECK(parse("7")[0].second.shape.empty());
}

TEST_CASE("json: scalar values") {
  const Fields f = parse(
      R"({"t": true, "f": false, "i": -5, "u": 18446744073709551615, "big": 9223372036854775807,
          "x": 2.5, "e": 1e3, "s": "h\u00e9llo \ud83d\ude00"})");
  CHECK(f[0].second.dtype == DType::BOOL);
  CHECK(f[0].second.shape.empty());
  CHECK(f[0].second.data == std::vector<uint8_t>{1});
  CHECK(f[1].second.data == std::vector<uint8_t>{0});
  CHECK(f[2].second.dtype == DType::I64);
  CHECK(values_of<int64_t>(f[2].second) == std::vector<int64_t>{-5});
  CHECK(f[3].second.dtype == DType::F64);
  CHECK(values_of<double>(f[3].second) == std::vector<double>{18446744073709551615.0});
  CHECK(f[4].second.dtype == DType::I64);
  CHECK(values_of<int64_t>(f[4].second) == std::vector<int64_t>{INT64_MAX});
  CHECK(f[5].second.dtype == DType::F64);
  CHECK(values_of<double>(f[5].second) == std::vector<double>{2.5});
  CHECK(f[6].second.dtype == DType::F64);
  CHECK(f[7].second.kind == Kind::String);
  CHECK(f[7].second.dtype == DType::U8);
  CHECK(text_of(f[7].second) == "h\xC3\xA9llo \xF0\x9F\x98\x80");
  CHECK(f[7].second.shape == std::vector<int64_t>{static_cast<int64_t>(f[7].second.data.size())});
}

TEST_CASE("json: rectangular numeric arrays become tensors") {
  const Fields f = parse(
      R"({"b": [true, false], "i": [[1, 2, 3], [4, 5, 6]], "mix": [true, 2], "fl": [1, 2.5],
          "e": [], "e2": [[], []], "u": [1, 18446744073709551615], "deep": [[[1], [2]]]})");
  CHECK(f[0].second.dtype == DType::BOOL);
  CHECK(f[0].second.data == std::vector<uint8_t>{1, 0});
  CHECK(f[1].second.dtype == DType::I64);
  CHECK(f[1].second.shape == std::vector<int64_t>{2, 3});
  CHECK(values_of<int64_t>(f[1].second) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(f[2].second.dtype == DType::I64);
  CHECK(values_of<int64_t>(f[2].second) == std::vector<int64_t>{1, 2});
  CHECK(f[3].second.dtype == DType::F64);
  CHECK(values_of<double>(f[3].second) == std::vector<double>{1.0, 2.5});
  CHECK(f[4].second.kind == Kind::Numeric);
  CHECK(f[4].second.dtype == DType::F64);
  CHECK(f[4].second.shape == std::vector<int64_t>{0});
  CHECK(f[5].second.shape == std::vector<int64_t>{2, 0});
  CHECK(f[5].second.data.empty());
  CHECK(f[6].second.dtype == DType::F64);
  CHECK(f[7].second.shape == std::vector<int64_t>{1, 2, 1});
}

TEST_CASE("json: other arrays are kept as compact JSON text") {
  const Fields f = parse(
      R"({"s": ["a", "\u00e9"], "o": [{"k": 1}], "ragged": [[1, 2], [3]], "n": [1, null], "shape": [1, [2]],
          "e": [[], [1]], "sub": [[1], [[2]]]})");
  CHECK(text_of(f[0].second) == "[\"a\",\"\xC3\xA9\"]");
  CHECK(text_of(f[1].second) == "[{\"k\":1}]");
  CHECK(text_of(f[2].second) == "[[1,2],[3]]");
  CHECK(text_of(f[3].second) == "[1,null]");
  CHECK(text_of(f[4].second) == "[1,[2]]");
  CHECK(text_of(f[5].second) == "[[],[1]]");
  CHECK(text_of(f[6].second) == "[[1],[[2]]]");
  for (const auto& field : f) CHECK(field.second.kind == Kind::Json);
}

TEST_CASE("json: keys colliding after flattening are refused, naming the field") {
  CHECK_THROWS_WITH(parse(R"({"a.b": 1, "a": {"b": 2}})"), Contains("'a.b'"));
  CHECK_THROWS_WITH(parse(R"({"a": 1, "a": 2})"), Contains("'a' twice"));
  CHECK_THROWS_WITH(parse(R"({"x": {"a": 1, "a": 2}})"), Contains("'a' twice"));
  CHECK_NOTHROW(parse(R"({"x": {"a": 1}, "y": {"a": 2}, "z": [{"a": 1}, {"a": 2}]})"));
  CHECK_THROWS_WITH(parse(R"({"": 1})"), Contains("empty key"));
}

TEST_CASE("json: nesting deeper than 64 levels is refused before parsing") {
  const std::string deep(10000, '[');
  CHECK_THROWS_WITH(parse(deep + std::string(10000, ']')), Contains("deeper than 64"));
  CHECK_THROWS_WITH(parse(deep), Contains("deeper than 64"));
  std::string objects;
  for (int i = 0; i < 10000; ++i) objects += "{\"a\":";
  CHECK_THROWS_WITH(parse(objects), Contains("deeper than 64"));
  CHECK_NOTHROW(parse(std::string(64, '[') + std::string(64, ']')));
  CHECK_THROWS_AS(parse(std::string(65, '[') + std::string(65, ']')), ParseError);
  CHECK_NOTHROW(parse("{\"s\": \"" + deep + "\"}"));  // brackets inside strings do not count
  CHECK_NOTHROW(parse("{\"s\\\"\": \"\\\\\", \"t\": [[1]]}"));
}

TEST_CASE("json: NaN, Infinity and numbers past double range are refused") {
  for (const std::string bad : {"{\"x\": NaN}", "{\"x\": Infinity}", "{\"x\": -Infinity}",
                                "[1e400]", "{\"x\": -1e999}", "nan"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse(bad), ParseError);
  }
}

TEST_CASE("json: malformed documents and invalid UTF-8 are refused") {
  for (const std::string bad :
       {"", "   ", "{", "{\"a\": 1,}", "[1, 2", "{'a': 1}", "{\"a\": 1} x", "// c\n1",
        "{\"a\": \"\xC3\x28\"}", "\xFF", "{\"a\": \"\xED\xA0\x80\"}", "\"\\ud800\""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse(bad), ParseError);
  }
  CHECK_THROWS_WITH(parse("{\"a\": \"\xC3\x28\"}"), Contains("UTF-8"));
}

TEST_CASE("json: a UTF-8 BOM is accepted") {
  CHECK(names(parse("\xEF\xBB\xBF{\"a\": 1}")) == std::vector<std::string>{"a"});
}
