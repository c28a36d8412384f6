// Label geometry (convert/label_geometry.h) against hand arithmetic: each expected value below is
// computed here from the affine's six numbers, never by the code under test.
#include "convert/label_geometry.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "common/error.h"

using namespace tarmac;
using Catch::Matchers::Contains;

namespace {

SampleField numeric(const std::string& name, std::vector<double> d, std::vector<int64_t> shape,
                    DType dtype = DType::F64) {
  SampleField f;
  f.name = name;
  f.member = "k.json";
  f.value.kind = FieldValue::Kind::Numeric;
  f.value.shape = std::move(shape);
  store_doubles(f.value, d);  // F64 or F32 storage
  if (dtype == DType::F32) {
    f.value.dtype = DType::F32;
    std::vector<uint8_t> bytes(d.size() * 4);
    for (size_t i = 0; i < d.size(); ++i) {
      const float v = static_cast<float>(d[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    f.value.data = bytes;
  }
  return f;
}

SampleField json_field(const std::string& name, const std::string& text) {
  SampleField f;
  f.name = name;
  f.member = "k.json";
  f.value.kind = FieldValue::Kind::Json;
  f.value.data.assign(text.begin(), text.end());
  f.value.shape = {static_cast<int64_t>(text.size())};
  return f;
}

// A horizontal flip of a 100-wide image, a crop at (10, 20) and a scale of 0.5:
// x' = 0.5 * (99 - x - 10), y' = 0.5 * (y - 20), in pixel centres.
const Affine kFlipCropScale = {-0.5, 0, 0.5 * 89, 0, 0.5, -10};

double fx(double x) {
  return 0.5 * (89 - x);
}
double fy(double y) {
  return 0.5 * y - 10;
}

}  // namespace

TEST_CASE("label geometry: points move by the affine, their other values kept, F32 kept") {
  SampleField f = numeric("kp", {30, 40, 0.9, 50, 60, 0.1}, {2, 3}, DType::F32);
  transform_points(f, kFlipCropScale);
  CHECK(f.value.dtype == DType::F32);
  const std::vector<double> d = as_doubles(f.value);
  CHECK(d == std::vector<double>{fx(30), fy(40), static_cast<double>(0.9f), fx(50), fy(60),
                                 static_cast<double>(0.1f)});
  SampleField none = numeric("kp", {}, {0, 2});  // a ragged list of no points
  CHECK_NOTHROW(transform_points(none, kFlipCropScale));
  SampleField one_value = numeric("kp", {1, 2}, {2, 1});
  CHECK_THROWS_WITH(transform_points(one_value, kFlipCropScale),
                    Contains("points field 'kp' (member 'k.json') has shape [2, 1]"));
}

TEST_CASE("label geometry: boxes by their corners, in both conventions") {
  // xywh, pixel centres: corners (10, 30) and (30, 70) map as points; a flip swaps x0 and x1,
  // so the width comes out negative exactly as (x1' - x0').
  SampleField c = numeric("bbox", {10, 30, 20, 40, 0.7}, {5});
  transform_boxes(c, false, kFlipCropScale, BoxConvention::Centers);
  CHECK(as_doubles(c.value) ==
        std::vector<double>{fx(10), fy(30), fx(30) - fx(10), fy(70) - fy(30), 0.7});
  // xyxy, pixel edges: each corner moved as the centre half a pixel inside it, then back out.
  SampleField e = numeric("bbox", {10, 30, 30, 70}, {1, 4});
  transform_boxes(e, true, kFlipCropScale, BoxConvention::Edges);
  CHECK(as_doubles(e.value) ==
        std::vector<double>{fx(9.5) + 0.5, fy(29.5) + 0.5, fx(29.5) + 0.5, fy(69.5) + 0.5});
  SampleField short_box = numeric("bbox", {1, 2, 3}, {3});
  CHECK_THROWS_AS(transform_boxes(short_box, false, kFlipCropScale, BoxConvention::Edges),
                  SampleError);
}

TEST_CASE("label geometry: camera intrinsics become A K, as K or as fx, fy, cx, cy") {
  // A = [[-0.5, 0, 44.5], [0, 0.5, -10], [0, 0, 1]]; A K by hand for K = [[500, 0, 320],
  // [0, 510, 240], [0, 0, 1]].
  SampleField k = numeric("cam", {500, 0, 320, 0, 510, 240, 0, 0, 1}, {3, 3});
  transform_camera(k, kFlipCropScale, false);
  CHECK(as_doubles(k.value) ==
        std::vector<double>{-250, 0, -0.5 * 320 + 44.5, 0, 255, 0.5 * 240 - 10, 0, 0, 1});
  SampleField four = numeric("cam", {500, 510, 320, 240}, {4});
  transform_camera(four, kFlipCropScale, false);
  CHECK(as_doubles(four.value) == std::vector<double>{-250, 255, -115.5, 110});
  // Edges: the principal point is moved as a pixel-edge point (half a pixel in, and back).
  SampleField edges = numeric("cam", {500, 510, 320, 240}, {4});
  transform_camera(edges, kFlipCropScale, true);
  CHECK(as_doubles(edges.value) ==
        std::vector<double>{-250, 255, fx(319.5) + 0.5, fy(239.5) + 0.5});
  SampleField bad = numeric("cam", {1, 2, 3}, {3});
  CHECK_THROWS_WITH(transform_camera(bad, kFlipCropScale, false),
                    Contains("--camera needs intrinsics [3, 3] (K) or [4] (fx, fy, cx, cy)"));
}

TEST_CASE("label geometry: polygons, numeric or COCO's JSON lists; an RLE is refused") {
  SampleField rows = numeric("seg", {10, 20, 30, 40}, {1, 4});
  transform_polygons(rows, kFlipCropScale);
  CHECK(as_doubles(rows.value) == std::vector<double>{fx(10), fy(20), fx(30), fy(40)});
  SampleField odd = numeric("seg", {1, 2, 3}, {1, 3});
  CHECK_THROWS_WITH(transform_polygons(odd, kFlipCropScale), Contains("odd number"));
  SampleField coco = json_field("seg", "[[10, 20, 30, 40, 50, 60]]");
  transform_polygons(coco, kFlipCropScale);
  const auto j = nlohmann::json::parse(coco.value.data.begin(), coco.value.data.end());
  CHECK(j ==
        nlohmann::json::parse("[[" + std::to_string(fx(10)) + "," + std::to_string(fy(20)) + "," +
                              std::to_string(fx(30)) + "," + std::to_string(fy(40)) + "," +
                              std::to_string(fx(50)) + "," + std::to_string(fy(60)) + "]]"));
  CHECK(coco.value.shape == std::vector<int64_t>{static_cast<int64_t>(coco.value.data.size())});
  SampleField rle = json_field("seg", R"({"counts": [1, 2], "size": [1, 3]})");
  CHECK_THROWS_WITH(transform_polygons(rle, kFlipCropScale),
                    Contains("is a run-length encoding, not polygons: pass --masks seg"));
}

TEST_CASE("label geometry: 3D points and axis-angle poses are checked, not moved") {
  CHECK_NOTHROW(check_points3d(numeric("j3d", {1, 2, 3}, {1, 3})));
  CHECK_THROWS_WITH(check_points3d(numeric("j3d", {1, 2}, {1, 2})),
                    Contains("its last axis must hold x, y, z"));
  AxisAngleField smpl{"pose", "smpl", 24, {}};
  CHECK_NOTHROW(check_axis_angle(numeric("pose", std::vector<double>(72, 0.1), {72}), smpl));
  CHECK_NOTHROW(check_axis_angle(numeric("pose", std::vector<double>(72, 0.1), {24, 3}), smpl));
  CHECK_THROWS_WITH(check_axis_angle(numeric("pose", std::vector<double>(69, 0.1), {69}), smpl),
                    Contains("layout smpl has 24 joints, so 72 values, not 69"));
  AxisAngleField pairs{"pose", "pairs", 0, {{0, 5}}};
  CHECK_THROWS_WITH(check_axis_angle(numeric("pose", std::vector<double>(9, 0), {3, 3}), pairs),
                    Contains("pair 0-5 names joint 5"));
}

TEST_CASE("label geometry: a declared field that is missing, null or not numeric is refused") {
  std::vector<SampleField> fields = {numeric("kp", {1, 2}, {2}), json_field("meta", "{}")};
  CHECK(&numeric_field(fields, "kp", "points") == &fields[0]);
  CHECK(find_field(fields, "nope") == nullptr);
  CHECK_THROWS_WITH(numeric_field(fields, "nope", "points"),
                    Contains("points field 'nope' is missing"));
  CHECK_THROWS_WITH(numeric_field(fields, "meta", "boxes"),
                    Contains("boxes field 'meta' (member 'k.json') is not numeric"));
  fields[0].value.null = true;
  CHECK_THROWS_WITH(numeric_field(fields, "kp", "points"), Contains("is null"));
  try {
    numeric_field(fields, "nope", "points");
  } catch (const SampleError& e) {
    CHECK(e.code() == ErrorCode::BadField);
  }
}

TEST_CASE("label geometry: --masks text from the field, or from its flattened counts and size") {
  std::vector<SampleField> whole = {json_field("m", "[[1,2,3,4,5,6]]")};
  CHECK(segmentation_text(whole, "m") == "[[1,2,3,4,5,6]]");
  std::vector<SampleField> flat = {numeric("m.counts", {3, 1, 2}, {3}),
                                   numeric("m.size", {2, 3}, {2})};
  CHECK(nlohmann::json::parse(segmentation_text(flat, "m")) ==
        nlohmann::json::parse(R"({"counts": [3, 1, 2], "size": [2, 3]})"));
  CHECK_THROWS_WITH(segmentation_text(flat, "other"), Contains("mask field 'other' is missing"));
}
