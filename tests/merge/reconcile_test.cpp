// The merged schema's pieces (lib/merge/reconcile.cpp): how two parts' specs of one field join,
// and when a field becomes JSON text. Hand-built specs, expected values written out by hand.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "common/error.h"
#include "merge/merge_internal.h"

using namespace tarmac;
using namespace tarmac::merge_detail;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

FieldSpec spec_of(const std::string& name, FieldKind kind, DType dtype, std::vector<int64_t> shape,
                  bool ragged = false, const std::string& source = "json") {
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.ragged = ragged;
  f.source = source;
  return f;
}

// The message join_field_spec throws for `o` joined with `f` (field "x", parts A then B).
std::string join_refusal(FieldSpec o, const FieldSpec& f) {
  try {
    join_field_spec(o, f, "x", "A", "B");
  } catch (const FatalError& e) {
    return e.what();
  }
  FAIL("join_field_spec accepted what it must refuse");
  return "";
}

}  // namespace

TEST_CASE("join_field_spec promotes a number's dtype and keeps a field nullable once it is") {
  FieldSpec o = spec_of("score", FieldKind::Numeric, DType::I64, {});
  FieldSpec f = spec_of("score", FieldKind::Numeric, DType::F64, {});
  f.nullable = true;
  join_field_spec(o, f, "score", "A", "B");
  CHECK(o.dtype == DType::F64);
  CHECK(o.nullable);
  CHECK_FALSE(o.ragged);
  CHECK(o.shape.empty());
  // A later part that is never null does not undo it; U8 beside I64 stays I64's.
  FieldSpec g = spec_of("score", FieldKind::Numeric, DType::U8, {});
  FieldSpec i = spec_of("score", FieldKind::Numeric, DType::I64, {});
  join_field_spec(i, g, "score", "A", "B");
  CHECK(i.dtype == DType::I64);
  CHECK_FALSE(i.nullable);
  join_field_spec(o, g, "score", "B", "C");
  CHECK(o.nullable);
}

TEST_CASE("join_field_spec makes a first axis that differs, or is ragged in one part, ragged") {
  // [1, 2] beside [3, 2] from JSON: one run would have stored it ragged.
  FieldSpec o = spec_of("pts", FieldKind::Numeric, DType::F64, {1, 2});
  join_field_spec(o, spec_of("pts", FieldKind::Numeric, DType::F64, {3, 2}), "pts", "A", "B");
  CHECK(o.ragged);
  CHECK(o.shape == std::vector<int64_t>{-1, 2});
  // The same first axis stays fixed.
  FieldSpec same = spec_of("pts", FieldKind::Numeric, DType::F32, {3, 2}, false, "npz");
  join_field_spec(same, spec_of("pts", FieldKind::Numeric, DType::F32, {3, 2}, false, "npz"), "pts",
                  "A", "B");
  CHECK_FALSE(same.ragged);
  CHECK(same.shape == std::vector<int64_t>{3, 2});
  // Ragged in the later part only, whatever the source: ragged.
  FieldSpec fixed = spec_of("pts", FieldKind::Numeric, DType::F32, {3, 2}, false, "npz");
  join_field_spec(fixed, spec_of("pts", FieldKind::Numeric, DType::F32, {-1, 2}, true, "npz"),
                  "pts", "A", "B");
  CHECK(fixed.ragged);
  CHECK(fixed.shape == std::vector<int64_t>{-1, 2});
}

TEST_CASE("join_field_spec refuses another kind, another inner shape, another fixed length") {
  CHECK_THAT(join_refusal(spec_of("x", FieldKind::Numeric, DType::I64, {}),
                          spec_of("x", FieldKind::String, DType::U8, {-1}, true)),
             Equals("field 'x' is of kind numeric in part 'A' but of kind string in part 'B'; "
                    "the parts cannot be merged: one run over all their inputs keeps such a "
                    "field as JSON text (convert the inputs in one run)"));
  CHECK_THAT(join_refusal(spec_of("x", FieldKind::Numeric, DType::F64, {-1, 2}, true),
                          spec_of("x", FieldKind::Numeric, DType::F64, {-1, 3}, true)),
             Equals("field 'x' is of shape [-1, 2] in part 'A' but of shape [-1, 3] in part 'B'; "
                    "the parts cannot be merged"));
  CHECK_THAT(join_refusal(spec_of("x", FieldKind::Numeric, DType::F64, {}),
                          spec_of("x", FieldKind::Numeric, DType::F64, {2})),
             Equals("field 'x' is of shape [] in part 'A' but of shape [2] in part 'B'; "
                    "the parts cannot be merged"));
  // A fixed length that differs in a field not from JSON: only --ragged makes it joinable.
  CHECK_THAT(join_refusal(spec_of("x", FieldKind::Numeric, DType::F32, {4}, false, "npy"),
                          spec_of("x", FieldKind::Numeric, DType::F32, {5}, false, "npy")),
             Equals("field 'x' has shape [4] in part 'A' but [5] in part 'B'; convert every "
                    "part with --ragged x"));
}

TEST_CASE("joined_as_json: strings beside JSON values or empty lists, never beside numbers") {
  using K = FieldKind;
  CHECK(joined_as_json({K::String, K::Json}, false));
  CHECK(joined_as_json({K::Json}, false));
  CHECK(joined_as_json({K::String}, true));  // a string beside [] : both JSON text
  CHECK_FALSE(joined_as_json({K::String}, false));
  CHECK_FALSE(joined_as_json({K::Numeric}, true));
  CHECK_FALSE(joined_as_json({}, true));
  // Numbers beside strings or JSON: not rendered (join_field_spec refuses the kinds instead).
  CHECK_FALSE(joined_as_json({K::String, K::Numeric}, false));
  CHECK_FALSE(joined_as_json({K::Json, K::Numeric}, true));
}
