#include "format/json_keys.h"

#include <catch2/catch.hpp>

#include "common/error.h"
#include "format/field_spec.h"

using tarmac::format::scan_json_keys;

TEST_CASE("json keys: the top-level keys in document order, nesting and duplicates found") {
  const auto k = scan_json_keys(R"({"b": {"x": [1, 2]}, "a": 1, "c": {"b": 2}})", 3);
  CHECK(k.valid);
  CHECK_FALSE(k.too_deep);
  CHECK(k.duplicate.empty());
  CHECK(k.top_keys == std::vector<std::string>{"b", "a", "c"});
  CHECK(scan_json_keys(R"({"a": {"b": [[1]]}})", 3).too_deep);
  const auto top = scan_json_keys(R"({"a": 1, "b": 2, "a": 3})", 3);
  CHECK(top.duplicate == "a");
  CHECK(top.duplicate_at_top);
  const auto inner = scan_json_keys(R"({"a": {"k": 1, "k": 2}})", 3);
  CHECK(inner.duplicate == "k");
  CHECK_FALSE(inner.duplicate_at_top);
  const auto bad = scan_json_keys(R"({"a": )", 3);
  CHECK_FALSE(bad.valid);
  CHECK_FALSE(bad.error.empty());
}

TEST_CASE("schema: fields in document order, a field named twice refused") {
  const auto fields = tarmac::schema_from_json(
      R"({"z": {"kind": "numeric", "dtype": "I64", "shape": [], "ragged": false},)"
      R"( "a": {"kind": "numeric", "dtype": "F32", "shape": [2], "ragged": false}})");
  REQUIRE(fields.size() == 2);
  CHECK(fields[0].name == "z");
  CHECK(fields[1].name == "a");
  CHECK_THROWS_AS(
      tarmac::schema_from_json(
          R"({"z": {"kind": "numeric", "dtype": "I64", "shape": [], "ragged": false},)"
          R"( "z": {"kind": "numeric", "dtype": "F32", "shape": [2], "ragged": false}})"),
      tarmac::ParseError);
}
