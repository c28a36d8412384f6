#include "format/field_spec.h"

#include <catch2/catch.hpp>

#include "common/error.h"

using namespace tarmac;
using Catch::Matchers::Contains;

TEST_CASE("schema JSON: written and read back, in order") {
  const std::vector<FieldSpec> fields = {
      {"zeta", FieldKind::Numeric, DType::F32, {17, 3}, false, "json"},
      {"pts", FieldKind::Numeric, DType::I64, {-1, 2}, true, "smpl.npz"},
      {"caption", FieldKind::String, DType::U8, {-1}, true, "txt"},
      {"tags", FieldKind::Json, DType::U8, {-1}, true, "json"},
  };
  const std::string text = schema_to_json(fields);
  CHECK(text.find("\"zeta\"") < text.find("\"pts\""));  // the order of the fields is kept
  CHECK(
      text ==
      R"({"zeta":{"kind":"numeric","dtype":"F32","shape":[17,3],"ragged":false,"source":"json"},)"
      R"("pts":{"kind":"numeric","dtype":"I64","shape":[-1,2],"ragged":true,"source":"smpl.npz"},)"
      R"("caption":{"kind":"string","dtype":"U8","shape":[-1],"ragged":true,"source":"txt"},)"
      R"("tags":{"kind":"json","dtype":"U8","shape":[-1],"ragged":true,"source":"json"}})");
  CHECK(schema_from_json(text) == fields);
  CHECK(fields[0].sample_bytes() == 17 * 3 * 4);
  CHECK(fields[1].sample_bytes() == 0);
  CHECK(fields[1].inner_shape() == std::vector<int64_t>{2});
}

TEST_CASE("schema JSON: 'source' is informative, everything else is checked") {
  CHECK(schema_from_json(R"({"a":{"kind":"numeric","dtype":"U8","shape":[],"ragged":false}})")[0]
            .source.empty());
  auto refused = [](const std::string& text, const std::string& why) {
    INFO(text);
    CHECK_THROWS_WITH(schema_from_json(text), Contains(why));
  };
  refused("[]", "not a JSON object");
  refused("{", "not a JSON object");
  refused(R"({"a":1})", "field 'a' is not a JSON object");
  refused(R"({"a":{"dtype":"U8","shape":[],"ragged":false}})", "has no 'kind'");
  refused(R"({"a":{"kind":"tensor","dtype":"U8","shape":[],"ragged":false}})", "unknown kind");
  refused(R"({"a":{"kind":"numeric","dtype":"F128","shape":[],"ragged":false}})", "unknown dtype");
  refused(R"({"a":{"kind":"numeric","dtype":"U8","shape":[1.5],"ragged":false}})",
          "non-integer dimension");
  refused(R"({"a":{"kind":"numeric","dtype":"U8","shape":[1,2,3,4,5,6,7,8],"ragged":false}})",
          "at most 7 dimensions");
  refused(R"({"a":{"kind":"numeric","dtype":"U8","shape":[2],"ragged":1}})", "'ragged'");
  refused(R"({"a":{"kind":"string","dtype":"U8","shape":[-1],"ragged":false}})", "not ragged U8");
  refused(R"({"a":{"kind":"json","dtype":"I8","shape":[-1],"ragged":true}})", "not ragged U8");
  refused(R"({"a":{"kind":"numeric","dtype":"U8","shape":[3],"ragged":true}})",
          "does not start with -1");
  refused(R"({"a":{"kind":"numeric","dtype":"U8","shape":[-1,-1],"ragged":true}})",
          "negative dimension");
  refused(R"({"a":{"kind":"numeric","dtype":"U8","shape":[2],"ragged":false,"source":3}})",
          "'source'");
}

TEST_CASE("kinds by name; the ragged-by-source rule; shape text") {
  for (auto k : {FieldKind::Numeric, FieldKind::String, FieldKind::Json})
    CHECK(kind_from_name(kind_name(k)) == k);
  CHECK_FALSE(kind_from_name("JSON"));
  CHECK(ragged_by_source("json"));
  CHECK(ragged_by_source("meta.json"));
  CHECK_FALSE(ragged_by_source("npz"));
  CHECK_FALSE(ragged_by_source("jsonl"));
  CHECK(shape_text({}) == "[]");
  CHECK(shape_text({3}) == "[3]");
  CHECK(kind_name(FieldKind::Numeric) == "numeric");
  CHECK(kind_name(FieldKind::String) == "string");
  CHECK(kind_name(FieldKind::Json) == "json");
  CHECK(shape_text({2, 0, 5}) == "[2, 0, 5]");
}

TEST_CASE("schema JSON: a field's geometry is written and read back; unknown kinds are ignored") {
  std::vector<FieldSpec> fields = {
      {"K", FieldKind::Numeric, DType::F64, {3, 3}, false, "json"},
      {"pose", FieldKind::Numeric, DType::F64, {69}, false, "json"},
      {"dets", FieldKind::Numeric, DType::F64, {-1, 4}, true, "json"},
  };
  fields[0].geometry = FieldGeometry{.kind = GeometryKind::Camera, .edges = true, .layout = "K"};
  fields[1].geometry = FieldGeometry{.kind = GeometryKind::AxisAngle,
                                     .layout = "smpl-body",
                                     .joints = 23,
                                     .pairs = axis_angle_layout("smpl-body")->pairs};
  fields[2].geometry = FieldGeometry{.kind = GeometryKind::Boxes, .xyxy = true};
  const std::string text = schema_to_json(fields);
  CHECK_THAT(text, Contains(R"("geometry":{"kind":"camera","convention":"edges","layout":"K"})"));
  CHECK_THAT(text, Contains(R"("layout":"smpl-body","joints":23,"pairs":[[0,1],[3,4],[6,7],)"
                            R"([9,10],[12,13],[15,16],[17,18],[19,20],[21,22]]})"));
  CHECK_THAT(text, Contains(R"({"kind":"boxes","box_format":"xyxy","convention":"centers"})"));
  CHECK(schema_from_json(text) == fields);
  CHECK_FALSE(schema_from_json(R"({"a":{"kind":"numeric","dtype":"F32","shape":[2],"ragged":false,)"
                               R"("geometry":{"kind":"quaternion"}}})")[0]
                  .geometry.has_value());
  CHECK_THROWS_WITH(schema_from_json(R"({"a":{"kind":"numeric","dtype":"F32","shape":[2],)"
                                     R"("ragged":false,"geometry":{"kind":"axis_angle",)"
                                     R"("layout":"pairs","joints":3,"pairs":[[0,1],[1,2]]}}})"),
                    Contains("field 'a' has a 'geometry' that names a joint in two pairs"));
  // A layout's joints are fixed; a hand follows a flip only with the other hand's field.
  CHECK_THROWS_WITH(schema_from_json(R"({"a":{"kind":"numeric","dtype":"F32","shape":[69],)"
                                     R"("ragged":false,"geometry":{"kind":"axis_angle",)"
                                     R"("layout":"smpl","joints":23,"pairs":[]}}})"),
                    Contains("says 23 joints where layout smpl has 24"));
  CHECK_THROWS_WITH(schema_from_json(R"({"a":{"kind":"numeric","dtype":"F32","shape":[45],)"
                                     R"("ragged":false,"geometry":{"kind":"axis_angle",)"
                                     R"("layout":"mano-left","joints":15,"pairs":[]}}})"),
                    Contains("without the other hand's field ('partner')"));
}

TEST_CASE("axis-angle layouts: SMPL's pairs, shifted for body_pose and cut for SMPL-X's") {
  CHECK(axis_angle_layout("smpl")->joints == 24);
  CHECK(axis_angle_layout("smpl")->pairs.front() == std::pair<int, int>{1, 2});
  CHECK(axis_angle_layout("smpl")->pairs.back() == std::pair<int, int>{22, 23});
  CHECK(axis_angle_layout("smplx-body")->joints == 21);
  CHECK(axis_angle_layout("smplx-body")->pairs.size() == 8);
  CHECK(axis_angle_layout("smplx-body")->pairs.back() == std::pair<int, int>{19, 20});
  CHECK(axis_angle_layout("root")->pairs.empty());
  CHECK(axis_angle_layout("mano-left")->joints == 15);
  CHECK_FALSE(axis_angle_layout("pairs"));
}
