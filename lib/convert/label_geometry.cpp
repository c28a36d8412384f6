#include "convert/label_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "format/field_spec.h"
#include "transform/coco_mask.h"
#include "write/column_store.h"

namespace tarmac {

SampleField* find_field(std::vector<SampleField>& fields, const std::string& name) {
  for (auto& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<double> as_doubles(const FieldValue& v) {
  std::vector<uint8_t> out;
  convert_elements(v.dtype, v.data.data(), static_cast<uint64_t>(v.num_elements()), DType::F64,
                   out);
  std::vector<double> d(out.size() / 8);
  std::memcpy(d.data(), out.data(), out.size());
  return d;
}

void store_doubles(FieldValue& v, const std::vector<double>& d) {
  const DType to = v.dtype == DType::F32 ? DType::F32 : DType::F64;
  std::vector<uint8_t> out;
  convert_elements(DType::F64, reinterpret_cast<const uint8_t*>(d.data()), d.size(), to, out);
  v.dtype = to;
  v.data = std::move(out);
}

SampleField& numeric_field(std::vector<SampleField>& fields, const std::string& name,
                           const char* role) {
  SampleField* f = find_field(fields, name);
  if (!f)
    throw SampleError(std::string(role) + " field '" + name + "' is missing", ErrorCode::BadField);
  if (f->value.null)
    throw SampleError(
        std::string(role) + " field '" + name + "' (member '" + f->member + "') is null",
        ErrorCode::BadField);
  if (f->value.kind != FieldValue::Kind::Numeric)
    throw SampleError(
        std::string(role) + " field '" + name + "' (member '" + f->member + "') is not numeric",
        ErrorCode::BadField);
  return *f;
}

void transform_points(SampleField& f, const Affine& m) {
  const auto& shape = f.value.shape;
  if (f.value.num_elements() == 0 && !shape.empty()) return;  // a ragged list of no points
  if (shape.empty() || shape.back() < 2)
    throw SampleError("points field '" + f.name + "' (member '" + f.member + "') has shape " +
                          shape_text(shape) + "; its last axis must hold x, y (at least 2 values)",
                      ErrorCode::BadField);
  std::vector<double> d = as_doubles(f.value);
  const size_t stride = static_cast<size_t>(shape.back());
  for (size_t i = 0; i + stride <= d.size(); i += stride)
    apply_affine(m, d[i], d[i + 1], d[i], d[i + 1]);
  store_doubles(f.value, d);
}

void transform_boxes(SampleField& f, bool xyxy, const Affine& m, BoxConvention convention) {
  const auto& shape = f.value.shape;
  if (f.value.num_elements() == 0 && !shape.empty()) return;  // a ragged list of no boxes
  if (shape.empty() || shape.back() < 4)
    throw SampleError("boxes field '" + f.name + "' (member '" + f.member + "') has shape " +
                          shape_text(shape) +
                          "; its last axis must hold at least 4 values (x, y, w, h or x0, y0, "
                          "x1, y1 first; the others, such as a confidence, are kept as they are)",
                      ErrorCode::BadField);
  std::vector<double> d = as_doubles(f.value);
  const auto stride = static_cast<size_t>(shape.back());
  for (size_t i = 0; i + stride <= d.size(); i += stride) {
    double x0 = d[i], y0 = d[i + 1], x1 = xyxy ? d[i + 2] : d[i] + d[i + 2],
           y1 = xyxy ? d[i + 3] : d[i + 1] + d[i + 3];
    // Corners in edge coordinates are moved as the pixel-centre points half a pixel inside
    // them, then back out: the output box is in the same convention.
    const double e = convention == BoxConvention::Edges ? 0.5 : 0.0;
    apply_affine(m, x0 - e, y0 - e, x0, y0);
    apply_affine(m, x1 - e, y1 - e, x1, y1);
    x0 += e;
    y0 += e;
    x1 += e;
    y1 += e;
    d[i] = x0;
    d[i + 1] = y0;
    d[i + 2] = xyxy ? x1 : x1 - x0;
    d[i + 3] = xyxy ? y1 : y1 - y0;
  }
  store_doubles(f.value, d);
}

// "field 'K' (member 'a.json')", for messages about a declared field.
std::string field_where(const char* role, const SampleField& f) {
  return std::string(role) + " field '" + f.name + "' (member '" + f.member + "')";
}

// --points3d: camera-frame points, x, y, z first; a crop or resize leaves them as they are.
void check_points3d(const SampleField& f) {
  const auto& shape = f.value.shape;
  if (f.value.num_elements() == 0 && !shape.empty()) return;
  if (shape.empty() || shape.back() < 3)
    throw SampleError(field_where("points3d", f) + " has shape " + shape_text(shape) +
                          "; its last axis must hold x, y, z (at least 3 values)",
                      ErrorCode::BadField);
}

// --axis-angle: [..., 3] or flat [3 * J], J the layout's joints (for pairs:, above every pair's
// index). Stored as it is: a crop or resize does not rotate the camera.
void check_axis_angle(const SampleField& f, const AxisAngleField& a) {
  const auto& shape = f.value.shape;
  const int64_t n = f.value.num_elements();
  const bool rows_of_3 = !shape.empty() && shape.back() == 3;
  const bool flat = !shape.empty() && shape.back() == n;
  std::string reason;
  if (shape.empty() || n % 3 != 0 || (!rows_of_3 && !flat)) {
    reason = "it must be [..., 3] or a flat [3 * joints] of axis-angle vectors";
  } else if (a.joints > 0 && n != 3 * a.joints) {
    reason = "layout " + a.layout + " has " + std::to_string(a.joints) + " joints, so " +
             std::to_string(3 * a.joints) + " values, not " + std::to_string(n);
  } else if (a.joints == 0) {
    for (const auto& [x, y] : a.pairs)
      if (std::max(x, y) >= n / 3)
        reason = "it holds " + std::to_string(n / 3) + " joints, but pair " + std::to_string(x) +
                 "-" + std::to_string(y) + " names joint " + std::to_string(std::max(x, y));
  }
  if (!reason.empty())
    throw SampleError(field_where("axis-angle", f) + " has shape " + shape_text(shape) + ": " +
                          reason + " (--axis-angle " + f.name + ":" + a.layout + ")",
                      ErrorCode::BadField);
}

// --camera: K' = A K, A the 3x3 of the affine (for edges, the principal point moved to pixel
// centres and back, as --box-convention edges boxes are).
void transform_camera(SampleField& f, const Affine& m, bool edges) {
  const auto& shape = f.value.shape;
  const bool k = shape == std::vector<int64_t>{3, 3}, four = shape == std::vector<int64_t>{4};
  if (!k && !four)
    throw SampleError(field_where("camera", f) + " has shape " + shape_text(shape) +
                          "; --camera needs intrinsics [3, 3] (K) or [4] (fx, fy, cx, cy)",
                      ErrorCode::BadField);
  std::vector<double> d = as_doubles(f.value);
  double K[3][3] = {{d[0], 0, d[2]}, {0, d[1], d[3]}, {0, 0, 1}};
  if (k)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) K[r][c] = d[static_cast<size_t>(3 * r + c)];
  // A = T(+e) M T(-e): the same map in the field's own convention.
  const double e = edges ? 0.5 : 0.0;
  const double A[3][3] = {{m[0], m[1], m[0] * -e + m[1] * -e + m[2] + e},
                          {m[3], m[4], m[3] * -e + m[4] * -e + m[5] + e},
                          {0, 0, 1}};
  double out[3][3] = {};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 3; ++i) out[r][c] += A[r][i] * K[i][c];
  if (k) {
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) d[static_cast<size_t>(3 * r + c)] = out[r][c];
  } else {
    d = {out[0][0], out[1][1], out[0][2], out[1][2]};
  }
  store_doubles(f.value, d);
}

// --polygons: COCO's lists of x0, y0, x1, y1, ...: each vertex moved as a point. A numeric
// value is its rows (the last axis the coordinates); JSON text an array of them (ragged).
void transform_polygons(SampleField& f, const Affine& m) {
  FieldValue& v = f.value;
  if (v.kind == FieldValue::Kind::Numeric) {
    if (v.num_elements() == 0 && !v.shape.empty()) return;
    if (v.shape.empty() || v.shape.back() % 2 != 0)
      throw SampleError(field_where("polygons", f) + " has shape " + shape_text(v.shape) +
                            ": its polygons hold an odd number of coordinates (a polygon is x0, "
                            "y0, x1, y1, ...)",
                        ErrorCode::BadField);
    std::vector<double> d = as_doubles(v);
    for (size_t i = 0; i + 1 < d.size(); i += 2) apply_affine(m, d[i], d[i + 1], d[i], d[i + 1]);
    store_doubles(v, d);
    return;
  }
  if (v.kind != FieldValue::Kind::Json)
    throw SampleError(field_where("polygons", f) + " is text, not polygons", ErrorCode::BadField);
  CocoSegmentation seg;
  try {
    seg = parse_coco_segmentation(
        std::string_view(reinterpret_cast<const char*>(v.data.data()), v.data.size()),
        ~uint64_t{0});
  } catch (const ParseError& e) {
    throw SampleError(field_where("polygons", f) + ": " + e.what(), ErrorCode::BadField);
  }
  if (seg.rle)
    throw SampleError(field_where("polygons", f) +
                          " is a run-length encoding, not polygons: pass --masks " + f.name +
                          " to store it as a mask that follows the image",
                      ErrorCode::BadField);
  nlohmann::json out = nlohmann::json::array();
  for (auto& poly : seg.polygons) {
    for (size_t i = 0; i + 1 < poly.size(); i += 2)
      apply_affine(m, poly[i], poly[i + 1], poly[i], poly[i + 1]);
    out.push_back(poly);
  }
  const std::string text = out.dump();
  v.data.assign(text.begin(), text.end());
  v.shape = {static_cast<int64_t>(v.data.size())};
}

// --masks NAME: the segmentation's JSON text, from field NAME (JSON text or numeric
// polygons), or from NAME.counts and NAME.size (an RLE object a JSON member flattened).
std::string segmentation_text(const std::vector<SampleField>& fields, const std::string& name) {
  const SampleField* whole = nullptr;
  const SampleField *counts = nullptr, *size = nullptr;
  for (const auto& f : fields) {
    if (f.name == name) whole = &f;
    if (f.name == name + ".counts") counts = &f;
    if (f.name == name + ".size") size = &f;
  }
  auto json_of = [](const SampleField& f) -> nlohmann::json {
    const FieldValue& v = f.value;
    if (v.kind == FieldValue::Kind::Json)
      return nlohmann::json::parse(v.data.begin(), v.data.end(), nullptr, false);
    if (v.kind == FieldValue::Kind::String) return std::string(v.data.begin(), v.data.end());
    // Numbers as a nested array of the value's shape.
    const std::vector<double> d = as_doubles(v);
    std::function<nlohmann::json(size_t, size_t&)> nest = [&](size_t axis, size_t& at) {
      if (axis == v.shape.size()) return nlohmann::json(d[at++]);
      nlohmann::json a = nlohmann::json::array();
      for (int64_t i = 0; i < v.shape[axis]; ++i) a.push_back(nest(axis + 1, at));
      return a;
    };
    size_t at = 0;
    return nest(0, at);
  };
  if (whole && !whole->value.null) return json_of(*whole).dump();
  if (counts && size && !counts->value.null && !size->value.null) {
    nlohmann::json j = {{"counts", json_of(*counts)}, {"size", json_of(*size)}};
    // JSON numbers parsed as F64 hold whole counts: back to integers for the parser.
    for (const char* key : {"counts", "size"})
      if (j[key].is_array())
        for (auto& c : j[key])
          if (c.is_number_float() && c.get<double>() >= 0 &&
              c.get<double>() == std::floor(c.get<double>()) && c.get<double>() < 9e15)
            c = static_cast<uint64_t>(c.get<double>());
    return j.dump();
  }
  throw SampleError("mask field '" + name + "' is " +
                        (whole || counts || size ? "null" : "missing") + " (--masks " + name +
                        " needs a segmentation in every sample: polygons or an RLE)",
                    ErrorCode::BadField);
}

}  // namespace tarmac
