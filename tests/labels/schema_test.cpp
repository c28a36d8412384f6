#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/schema.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::FieldValue;
using tarmac::SampleError;
using tarmac::SampleField;
using tarmac::Schema;
using Kind = FieldValue::Kind;

namespace {

SampleField numeric(const std::string& name, DType dtype, std::vector<int64_t> shape,
                    const std::string& source = "json") {
  SampleField f;
  f.name = name;
  f.member = "0001." + source;
  f.source = source;
  f.value.kind = Kind::Numeric;
  f.value.dtype = dtype;
  f.value.shape = std::move(shape);
  f.value.data.assign(static_cast<size_t>(f.value.num_elements()) * tarmac::dtype_size(dtype), 0);
  return f;
}

SampleField text(const std::string& name, const std::string& s, const std::string& source = "txt") {
  SampleField f;
  f.name = name;
  f.member = "0001." + source;
  f.source = source;
  f.value.kind = Kind::String;
  f.value.dtype = DType::U8;
  f.value.shape = {static_cast<int64_t>(s.size())};
  f.value.data.assign(s.begin(), s.end());
  return f;
}

const tarmac::FieldSchema& field(const Schema& s, const std::string& name) {
  for (const auto& f : s.fields())
    if (f.name == name) return f;
  FAIL("no field " << name);
  throw std::logic_error("unreachable");
}

std::string error_of(Schema& s, const std::vector<SampleField>& fields) {
  try {
    s.observe(fields);
  } catch (const SampleError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Schema: the first sample fixes the set of fields") {
  Schema s({});
  s.observe({numeric("label", DType::I64, {}), numeric("box", DType::F64, {4})});
  CHECK(s.samples() == 1);
  REQUIRE(s.fields().size() == 2);
  CHECK(s.fields()[0].name == "label");
  CHECK(s.fields()[1].name == "box");
  CHECK(s.fields()[1].shape == std::vector<int64_t>{4});
  CHECK_FALSE(s.fields()[1].ragged);

  // Order within a later sample does not matter.
  s.observe({numeric("box", DType::F64, {4}), numeric("label", DType::I64, {})});
  CHECK(s.samples() == 2);

  const std::string missing = error_of(s, {numeric("label", DType::I64, {})});
  CHECK_THAT(missing, Contains("'box'"));
  CHECK_THAT(missing, Contains("missing"));

  const std::string extra =
      error_of(s, {numeric("label", DType::I64, {}), numeric("box", DType::F64, {4}),
                   numeric("score", DType::F64, {})});
  CHECK_THAT(extra, Contains("'score'"));
  CHECK(s.samples() == 2);
  CHECK(s.fields().size() == 2);
}

TEST_CASE("Schema: a field's kind may not change") {
  Schema s({});
  s.observe({numeric("caption", DType::I64, {})});
  const std::string e = error_of(s, {text("caption", "a cat")});
  CHECK_THAT(e, Contains("'caption'"));
  CHECK_THAT(e, Contains("string"));
  CHECK_THAT(e, Contains("numeric"));
}

TEST_CASE("Schema: dtypes are promoted across samples") {
  Schema s({});
  s.observe({numeric("a", DType::BOOL, {}), numeric("b", DType::I64, {2}),
             numeric("c", DType::U8, {}, "npy")});
  s.observe({numeric("a", DType::I64, {}), numeric("b", DType::F64, {2}),
             numeric("c", DType::I8, {}, "npy")});
  CHECK(field(s, "a").dtype == DType::I64);
  CHECK(field(s, "b").dtype == DType::F64);
  CHECK(field(s, "c").dtype == DType::I16);
  s.observe({numeric("a", DType::BOOL, {}), numeric("b", DType::I64, {2}),
             numeric("c", DType::U8, {}, "npy")});
  CHECK(field(s, "a").dtype == DType::I64);  // never narrows back
  CHECK(field(s, "b").dtype == DType::F64);
  CHECK(field(s, "c").dtype == DType::I16);
}

TEST_CASE("Schema: an empty value does not fix the dtype") {
  Schema s({});
  s.observe({numeric("tags", DType::F64, {0})});
  CHECK_FALSE(field(s, "tags").dtype_known);
  s.observe({numeric("tags", DType::I64, {3})});
  CHECK(field(s, "tags").dtype_known);
  CHECK(field(s, "tags").dtype == DType::I64);
  s.observe({numeric("tags", DType::F64, {0})});  // empty again: no promotion to F64
  CHECK(field(s, "tags").dtype == DType::I64);
  CHECK(field(s, "tags").ragged);
  CHECK(field(s, "tags").total_first_axis == 3);
}

TEST_CASE("Schema: a JSON field whose first axis varies becomes ragged") {
  for (const char* source : {"json", "meta.json"}) {
    INFO(source);
    Schema s({});
    for (int i = 0; i < 3; ++i) s.observe({numeric("boxes", DType::F64, {2, 4}, source)});
    CHECK_FALSE(field(s, "boxes").ragged);
    s.observe({numeric("boxes", DType::F64, {5, 4}, source)});
    CHECK(field(s, "boxes").ragged);
    CHECK(field(s, "boxes").total_first_axis == 2 * 3 + 5);
    s.observe({numeric("boxes", DType::F64, {0, 4}, source)});
    s.observe({numeric("boxes", DType::F64, {1, 4}, source)});
    CHECK(field(s, "boxes").total_first_axis == 2 * 3 + 5 + 0 + 1);
    CHECK(s.samples() == 6);
  }
}

TEST_CASE("Schema: an npy field whose first axis varies needs --ragged") {
  Schema s({});
  s.observe({numeric("points", DType::F32, {10, 3}, "npy")});
  const std::string e = error_of(s, {numeric("points", DType::F32, {11, 3}, "npy")});
  CHECK_THAT(e, Contains("--ragged points"));
  CHECK_THAT(e, Contains("[11, 3]"));
  CHECK_THAT(e, Contains("[10, 3]"));
  CHECK_FALSE(field(s, "points").ragged);
  CHECK(s.samples() == 1);

  // A source that merely contains "json" is not JSON.
  Schema t({});
  t.observe({numeric("p", DType::F32, {1}, "json.npy")});
  CHECK_THAT(error_of(t, {numeric("p", DType::F32, {2}, "json.npy")}), Contains("--ragged"));
}

TEST_CASE("Schema: a declared --ragged field is ragged from the first sample") {
  Schema s({"points"});
  s.observe({numeric("points", DType::F32, {10, 3}, "smpl.npz"), numeric("k", DType::I64, {})});
  CHECK(field(s, "points").ragged);
  CHECK_FALSE(field(s, "k").ragged);
  CHECK(field(s, "points").total_first_axis == 10);
  s.observe({numeric("points", DType::F32, {7, 3}, "smpl.npz"), numeric("k", DType::I64, {})});
  s.observe({numeric("points", DType::F32, {10, 3}, "smpl.npz"), numeric("k", DType::I64, {})});
  CHECK(field(s, "points").total_first_axis == 27);
}

TEST_CASE("Schema: a declared --ragged scalar is refused") {
  Schema s({"k"});
  CHECK_THAT(error_of(s, {numeric("k", DType::I64, {})}), Contains("'k'"));
  CHECK(s.samples() == 0);
}

// Regression: the first sample's fields are appended to the schema one by one, so when a later
// field of that sample is refused (a scalar declared --ragged) the earlier ones stay: fields() is
// not empty after the refusal, and the next first sample appends its fields a second time.
TEST_CASE("Schema: a refused first sample leaves the schema unchanged") {
  Schema s({"k"});
  CHECK_THROWS_AS(s.observe({numeric("box", DType::F64, {4}), numeric("k", DType::I64, {})}),
                  SampleError);
  CHECK(s.samples() == 0);
  CHECK(s.fields().empty());
  s.observe({numeric("box", DType::F64, {4}), numeric("k", DType::I64, {2})});
  CHECK(s.fields().size() == 2);
}

TEST_CASE("Schema: inner dimensions and ranks may not vary, even from JSON") {
  Schema s({"m"});
  s.observe({numeric("boxes", DType::F64, {2, 4}), numeric("m", DType::F32, {3, 2}, "npy")});
  std::string e =
      error_of(s, {numeric("boxes", DType::F64, {2, 5}), numeric("m", DType::F32, {3, 2}, "npy")});
  CHECK_THAT(e, Contains("'boxes'"));
  CHECK_THAT(e, Contains("only the first axis"));
  e = error_of(s, {numeric("boxes", DType::F64, {2, 4}), numeric("m", DType::F32, {4, 3}, "npy")});
  CHECK_THAT(e, Contains("'m'"));
  e = error_of(s, {numeric("boxes", DType::F64, {8}), numeric("m", DType::F32, {3, 2}, "npy")});
  CHECK_THAT(e, Contains("'boxes'"));
  CHECK_THAT(e, Contains("dimensions"));
  e = error_of(s, {numeric("boxes", DType::F64, {}), numeric("m", DType::F32, {3, 2}, "npy")});
  CHECK_THAT(e, Contains("'boxes'"));
  CHECK(s.samples() == 1);
}

TEST_CASE("Schema: a refused sample leaves the schema unchanged") {
  Schema s({});
  s.observe({numeric("a", DType::I64, {}), numeric("b", DType::I64, {3}, "npy"),
             numeric("c", DType::F32, {2, 2})});
  s.observe({numeric("a", DType::I64, {}), numeric("b", DType::I64, {3}, "npy"),
             numeric("c", DType::F32, {3, 2})});  // c becomes ragged
  const std::string before = schema_to_json(s.specs());
  const uint64_t total = field(s, "c").total_first_axis;
  // a and c would be widened and c extended before b fails.
  CHECK_THROWS_AS(s.observe({numeric("a", DType::F64, {}), numeric("c", DType::F64, {4, 2}),
                             numeric("b", DType::I64, {4}, "npy")}),
                  SampleError);
  CHECK(schema_to_json(s.specs()) == before);
  CHECK(field(s, "a").dtype == DType::I64);
  CHECK(field(s, "c").dtype == DType::F32);
  CHECK(field(s, "c").total_first_axis == total);
  CHECK(s.samples() == 2);
  // ... and a sample that only fails late on a kind mismatch, too.
  SampleField bad = text("a", "x", "json");
  CHECK_THROWS_AS(
      s.observe({numeric("c", DType::F64, {1, 2}), numeric("b", DType::I64, {3}, "npy"), bad}),
      SampleError);
  CHECK(schema_to_json(s.specs()) == before);
}

TEST_CASE("Schema: strings are ragged byte arrays") {
  Schema s({});
  s.observe({text("caption", "a cat")});
  s.observe({text("caption", "")});
  s.observe({text("caption", "two dogs")});
  const auto& f = field(s, "caption");
  CHECK(f.kind == Kind::String);
  CHECK(f.ragged);
  CHECK(f.dtype == DType::U8);
  CHECK(f.total_first_axis == 5 + 0 + 8);
}

TEST_CASE("Schema: to_json lists every field with kind, dtype, shape, raggedness, source") {
  Schema s({});
  s.observe({numeric("label", DType::I64, {}), numeric("boxes", DType::I64, {1, 4}),
             text("caption", "hi", "txt"), numeric("depth_scale", DType::F32, {2}, "npy")});
  s.observe({numeric("label", DType::BOOL, {}), numeric("boxes", DType::F64, {3, 4}),
             text("caption", "hello", "txt"), numeric("depth_scale", DType::F32, {2}, "npy")});
  CHECK(schema_to_json(s.specs()) ==
        "{\"label\":{\"kind\":\"numeric\",\"dtype\":\"I64\",\"shape\":[],\"ragged\":false,"
        "\"source\":\"json\"},"
        "\"boxes\":{\"kind\":\"numeric\",\"dtype\":\"F64\",\"shape\":[-1,4],\"ragged\":true,"
        "\"source\":\"json\"},"
        "\"caption\":{\"kind\":\"string\",\"dtype\":\"U8\",\"shape\":[-1],\"ragged\":true,"
        "\"source\":\"txt\"},"
        "\"depth_scale\":{\"kind\":\"numeric\",\"dtype\":\"F32\",\"shape\":[2],\"ragged\":false,"
        "\"source\":\"npy\"}}");
  CHECK(schema_to_json(Schema({}).specs()) == "{}");
}
