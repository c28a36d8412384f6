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

TEST_CASE("Schema: fields are the union of the samples'; one absent somewhere is nullable") {
  Schema s({});
  s.observe({numeric("label", DType::I64, {}), numeric("box", DType::F64, {4})});
  CHECK(s.samples() == 1);
  REQUIRE(s.fields().size() == 2);
  CHECK(s.fields()[0].name == "label");
  CHECK(s.fields()[1].name == "box");
  CHECK(s.fields()[1].shape == std::vector<int64_t>{4});
  CHECK_FALSE(s.fields()[1].ragged);
  CHECK_FALSE(s.fields()[1].nullable());

  // Order within a later sample does not matter.
  s.observe({numeric("box", DType::F64, {4}), numeric("label", DType::I64, {})});
  CHECK(s.samples() == 2);

  s.observe({numeric("label", DType::I64, {})});  // no box
  CHECK(field(s, "box").nullable());
  CHECK(field(s, "box").missing == 1);
  CHECK(field(s, "box").present == 2);
  CHECK_FALSE(field(s, "label").nullable());

  s.observe({numeric("label", DType::I64, {}), numeric("box", DType::F64, {4}),
             numeric("score", DType::F64, {})});  // new in the fourth sample
  CHECK(s.samples() == 4);
  REQUIRE(s.fields().size() == 3);
  CHECK(field(s, "score").missing == 3);
  CHECK(field(s, "score").present == 1);
  const auto specs = s.specs();
  CHECK(specs[1].nullable);
  CHECK(specs[2].nullable);
  CHECK_FALSE(specs[0].nullable);
  CHECK_THAT(schema_to_json(specs), Contains("\"nullable\":true"));
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

TEST_CASE("Schema: inner dimensions and ranks may not vary in arrays; JSON falls back to text") {
  Schema s({"m"});
  s.observe({numeric("boxes", DType::F64, {2, 4}), numeric("m", DType::F32, {3, 2}, "npy")});
  std::string e =
      error_of(s, {numeric("boxes", DType::F64, {2, 4}), numeric("m", DType::F32, {4, 3}, "npy")});
  CHECK_THAT(e, Contains("'m'"));
  CHECK_THAT(e, Contains("only the first axis"));
  e = error_of(s, {numeric("boxes", DType::F64, {2, 4}), numeric("m", DType::F32, {3}, "npy")});
  CHECK_THAT(e, Contains("'m'"));
  CHECK_THAT(e, Contains("dimensions"));
  CHECK(s.samples() == 1);
  // From JSON: the values cannot share a column type, so each is kept as its JSON text.
  s.observe({numeric("boxes", DType::F64, {2, 5}), numeric("m", DType::F32, {3, 2}, "npy")});
  CHECK(field(s, "boxes").kind == Kind::Json);
  CHECK(field(s, "boxes").mixed);
  CHECK(field(s, "boxes").rerender);
  s.observe({numeric("boxes", DType::F64, {}), numeric("m", DType::F32, {3, 2}, "npy")});
  CHECK(field(s, "boxes").present == 3);
  CHECK(field(s, "boxes").kind_counts[0] == 3);
}

TEST_CASE("Schema: a JSON field of conflicting kinds becomes JSON text, counted per kind") {
  Schema s({});
  s.observe({numeric("x", DType::I64, {})});
  s.observe({text("x", "seven", "json")});
  SampleField obj = text("x", "{\"a\":1}", "json");
  obj.value.kind = Kind::Json;
  s.observe({obj});
  s.observe({});
  const auto& f = field(s, "x");
  CHECK(f.kind == Kind::Json);
  CHECK(f.mixed);
  CHECK(f.kind_counts[0] == 1);
  CHECK(f.kind_counts[1] == 1);
  CHECK(f.kind_counts[2] == 1);
  CHECK(f.missing == 1);
  const auto spec = s.specs()[0];
  CHECK(spec.kind == Kind::Json);
  CHECK(spec.ragged);
  CHECK(spec.dtype == DType::U8);
  CHECK(spec.shape == std::vector<int64_t>{-1});
  CHECK(spec.nullable);
}

TEST_CASE("Schema: an empty array types nothing until a non-empty value comes") {
  Schema s({});
  s.observe({numeric("tags", DType::F64, {0})});
  s.observe({numeric("tags", DType::F64, {0})});
  SampleField strings = text("tags", "[\"a\",\"b\"]", "json");
  strings.value.kind = Kind::Json;  // an array of strings
  s.observe({strings});
  CHECK(field(s, "tags").kind == Kind::Json);
  CHECK_FALSE(field(s, "tags").mixed);  // no warning: [] was never a number
  CHECK(field(s, "tags").rerender);

  Schema t({});
  t.observe({numeric("pts", DType::F64, {0})});
  t.observe({numeric("pts", DType::I64, {2, 3})});  // the shape comes with the first values
  CHECK(field(t, "pts").kind == Kind::Numeric);
  CHECK(field(t, "pts").ragged);
  CHECK(field(t, "pts").shape[1] == 3);
  CHECK(field(t, "pts").total_first_axis == 2);
  t.observe({numeric("pts", DType::F64, {0})});  // [] again: an empty row
  CHECK(field(t, "pts").total_first_axis == 2);
  CHECK(field(t, "pts").dtype == DType::I64);
}

// Issue #38: a sample with no boxes ([]) after one with boxes ([1, 4]) made the whole field
// JSON text (with a mixed-types warning), so --boxes fields of detection data lost their dtype.
TEST_CASE("Schema: an empty list after a list of rows is an empty row of a ragged field") {
  Schema s({});
  s.observe({numeric("dets", DType::F64, {1, 4})});
  s.observe({numeric("dets", DType::F64, {0})});
  s.observe({numeric("dets", DType::F64, {3, 4})});
  CHECK(field(s, "dets").kind == Kind::Numeric);
  CHECK(field(s, "dets").ragged);
  CHECK_FALSE(field(s, "dets").mixed);
  CHECK(field(s, "dets").shape[1] == 4);
  CHECK(field(s, "dets").total_first_axis == 4);
}

// Issue #25, item 7: `cat --labels` printed "tags": <discarded>. The field was JSON text from its
// first value on, so the [] after it was not rendered as "[]": its record (no bytes) went into
// the column as it was, an empty text that is no JSON.
TEST_CASE("Schema: an empty array after arrays of strings is rendered as JSON text") {
  Schema s({});
  SampleField strings = text("tags", "[\"a\",\"b\"]", "json");
  strings.value.kind = Kind::Json;  // an array of strings
  s.observe({strings});
  CHECK(field(s, "tags").kind == Kind::Json);
  CHECK_FALSE(field(s, "tags").rerender);  // JSON text already: written as it came
  s.observe({numeric("tags", DType::F64, {0})});
  CHECK(field(s, "tags").kind == Kind::Json);
  CHECK(field(s, "tags").rerender);     // every value rendered as JSON text at the end
  CHECK_FALSE(field(s, "tags").mixed);  // no warning: an empty array types nothing
  s.observe({strings});
  CHECK(field(s, "tags").rerender);

  // A number or a string after JSON text is rendered too (and is a mix of types).
  Schema t({});
  t.observe({strings});
  t.observe({numeric("tags", DType::I64, {})});
  CHECK(field(t, "tags").rerender);
  CHECK(field(t, "tags").mixed);
  Schema u({});
  u.observe({strings});
  u.observe({text("tags", "one", "json")});
  CHECK(field(u, "tags").rerender);
  CHECK(field(u, "tags").mixed);
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
  // ... and a sample whose JSON fallback comes before the field that fails, too.
  SampleField fallback = text("a", "x", "json");
  CHECK_THROWS_AS(
      s.observe({numeric("c", DType::F64, {1, 2}), fallback, numeric("b", DType::I64, {4}, "npy")}),
      SampleError);
  CHECK(field(s, "a").kind == Kind::Numeric);
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

TEST_CASE("Schema: a null names a field without a value; the first value types it") {
  auto null_field = [](const std::string& name) {
    SampleField f = text(name, "", "json");
    f.value.kind = Kind::Json;
    f.value.null = true;
    return f;
  };
  Schema s({});
  s.observe({null_field("err"), numeric("w", DType::I64, {})});
  s.observe({null_field("err"), numeric("w", DType::I64, {})});
  REQUIRE(s.fields().size() == 2);
  CHECK_FALSE(field(s, "err").typed);
  CHECK(field(s, "err").missing == 2);
  CHECK(s.specs()[0].kind == Kind::Json);  // only nulls so far: JSON text, no values
  CHECK(s.specs()[0].nullable);
  s.observe({text("err", "timeout", "json"), numeric("w", DType::I64, {})});
  s.observe({null_field("err"), null_field("w")});
  CHECK(field(s, "err").typed);
  CHECK(field(s, "err").kind == Kind::String);
  CHECK(field(s, "err").missing == 3);
  CHECK(field(s, "err").present == 1);
  CHECK(field(s, "err").total_first_axis == 7);
  CHECK(field(s, "w").missing == 1);
  CHECK(field(s, "w").dtype == DType::I64);
  // A checkpoint keeps all of it.
  Schema r({});
  r.restore(s.checkpoint());
  CHECK(r.checkpoint() == s.checkpoint());
}
