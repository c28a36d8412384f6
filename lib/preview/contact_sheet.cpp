#include "preview/contact_sheet.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <set>
#include <string_view>

#include "common/error.h"
#include "common/number_text.h"
#include "format/json_object.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/table_metadata.h"
#include "read/dataset.h"
#include "transform/image_codec.h"

namespace tarmac::preview {
namespace fs = std::filesystem;

namespace {

// The layout, in sheet pixels (docs/cli.md, "tarmac preview"): a margin around the grid, a gap
// between cells and between an image and its dense maps, a caption strip under each cell.
constexpr int kMargin = 8;
constexpr int kGap = 8;
constexpr int kCaption = 20;
const cv::Scalar kBackground(24, 24, 24);
const cv::Scalar kText(255, 255, 255);
// Colours (BGR) of the 1st, 2nd, ... points field and boxes field.
const cv::Scalar kPointColours[] = {{0, 255, 0}, {255, 0, 255}, {255, 255, 0}, {0, 255, 255}};
const cv::Scalar kBoxColours[] = {{0, 0, 255}, {0, 128, 255}, {255, 0, 0}, {128, 0, 255}};

// COCO's person skeleton (categories[0].skeleton of person_keypoints_*.json), 1-based.
constexpr std::pair<int, int> kCocoSkeleton[] = {
    {16, 14}, {14, 12}, {17, 15}, {15, 13}, {12, 13}, {6, 12}, {7, 13}, {6, 7}, {6, 8}, {7, 9},
    {8, 10},  {9, 11},  {2, 3},   {1, 2},   {1, 3},   {2, 4},  {3, 5},  {4, 6}, {5, 7}};

struct BoxField {
  std::string name;
  bool xyxy = false;
};

// "NAME", "NAME:xyxy" or "NAME:xywh" (as the manifest records --boxes).
BoxField parse_box(const std::string& s) {
  for (const char* suffix : {":xyxy", ":xywh"})
    if (s.size() > 5 && s.ends_with(suffix))
      return {s.substr(0, s.size() - 5), std::string_view(suffix) == ":xyxy"};
  return {s, false};
}

// Every element of a numeric value as double.
std::vector<double> as_doubles(const TensorView& v) {
  std::vector<double> out;
  const size_t n = v.bytes.size() / dtype_size(v.dtype);
  out.reserve(n);
  auto take = [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < n; ++k) {
      T x;
      std::memcpy(&x, v.bytes.data() + k * sizeof(T), sizeof(T));
      out.push_back(static_cast<double>(x));
    }
  };
  switch (v.dtype) {
    case DType::F64:
      take(double{});
      break;
    case DType::F32:
      take(float{});
      break;
    case DType::I64:
      take(int64_t{});
      break;
    case DType::U64:
      take(uint64_t{});
      break;
    case DType::I32:
      take(int32_t{});
      break;
    case DType::U32:
      take(uint32_t{});
      break;
    case DType::I16:
      take(int16_t{});
      break;
    case DType::U16:
      take(uint16_t{});
      break;
    case DType::I8:
      take(int8_t{});
      break;
    case DType::U8:
    case DType::BOOL:
      take(uint8_t{});
      break;
    default:
      throw ArgumentError(std::string("values of dtype ") + std::string(dtype_name(v.dtype)) +
                          " cannot be drawn");
  }
  return out;
}

// The fields `convert` transformed as points / boxes, from the manifest (none when it has no
// such record).
void declared_fields(const fs::path& dir, std::vector<std::string>& points,
                     std::vector<std::string>& boxes) {
  auto d = format::declared_geometry(dir);
  points = std::move(d.points);
  boxes = std::move(d.boxes);
}

// Checks that `name` is a numeric field whose last axis has `last` values (at least, when
// `at_least`).
void check_field(const Dataset& ds, const std::string& name, const char* what, int64_t last,
                 bool at_least) {
  const FieldSpec* f = ds.find_field(name);
  if (!f || name == format::kAffineColumn)
    throw ArgumentError(std::string(what) + " field '" + name + "' is not a field of '" +
                        ds.path() + "'");
  const bool ok = f->kind == FieldKind::Numeric && !f->shape.empty() &&
                  (at_least ? f->shape.back() >= last : f->shape.back() == last);
  if (!ok)
    throw ArgumentError(std::string(what) + " field '" + name + "' has shape " +
                        shape_text(f->shape) + " (" + std::string(kind_name(f->kind)) +
                        "); it must be numeric with " + (at_least ? "at least " : "") +
                        std::to_string(last) + " values on its last axis");
}

// The samples to draw: the keys asked for, or n chosen by seed (Floyd's sampling, in dataset
// order).
std::vector<size_t> pick_samples(const Dataset& ds, const SheetOptions& o) {
  std::vector<size_t> out;
  if (!o.keys.empty()) {
    std::map<std::string_view, size_t> want;
    for (const auto& k : o.keys) want.emplace(k, SIZE_MAX);
    for (size_t i = 0; i < ds.size(); ++i)
      if (auto it = want.find(ds.key(i)); it != want.end() && it->second == SIZE_MAX)
        it->second = i;
    for (const auto& k : o.keys) {
      const size_t i = want.at(k);
      if (i == SIZE_MAX)
        throw ArgumentError("--keys: '" + ds.path() + "' has no sample with key '" + k +
                            "' ('tarmac ls " + ds.path() + "' lists them)");
      out.push_back(i);
    }
    return out;
  }
  const size_t n = ds.size();
  if (o.n >= n) {
    for (size_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::mt19937_64 rng(o.seed);
  std::set<size_t> chosen;
  for (size_t j = n - o.n; j < n; ++j) {
    const size_t t = static_cast<size_t>(rng() % (j + 1));
    chosen.insert(chosen.count(t) ? j : t);
  }
  return {chosen.begin(), chosen.end()};
}

// Sheet coordinates of a point of the stored image, scaled by (sx, sy): pixel centres map to
// pixel centres (format.md 3).
cv::Point2d scaled(double x, double y, double sx, double sy) {
  return {(x + 0.5) * sx - 0.5, (y + 0.5) * sy - 0.5};
}

cv::Mat to_bgr_tile(const Pixels& p, int tile_w, int tile_h) {
  cv::Mat rgb(p.height, p.width, CV_8UC3, const_cast<uint8_t*>(p.data.data()));
  cv::Mat bgr, out;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  const int interp = tile_h < p.height ? cv::INTER_AREA : cv::INTER_LINEAR;
  cv::resize(bgr, out, cv::Size(tile_w, tile_h), 0, 0, interp);
  return out;
}

// A dense map as a colour image: one channel (the first) normalised over its valid values
// (finite and non-zero) to a perceptual colour map, invalid pixels black; an 8-bit 3- or
// 4-channel map is shown as its colours.
cv::Mat colour_dense(const Pixels& p) {
  const size_t pixels = size_t(p.width) * size_t(p.height);
  if (p.dtype == DType::U8 && p.channels >= 3) {
    cv::Mat src(p.height, p.width, CV_8UC(p.channels), const_cast<uint8_t*>(p.data.data()));
    cv::Mat bgr;
    cv::cvtColor(src, bgr, p.channels == 4 ? cv::COLOR_RGBA2BGR : cv::COLOR_RGB2BGR);
    return bgr;
  }
  TensorView v;
  v.dtype = p.dtype;
  v.bytes = {p.data.data(), p.data.size()};
  const std::vector<double> all = as_doubles(v);
  const size_t stride = static_cast<size_t>(std::max(1, p.channels));
  double lo = INFINITY, hi = -INFINITY;
  for (size_t k = 0; k < pixels; ++k) {
    const double x = all[k * stride];
    if (std::isfinite(x) && x != 0) lo = std::min(lo, x), hi = std::max(hi, x);
  }
  cv::Mat grey(p.height, p.width, CV_8UC1, cv::Scalar(0));
  cv::Mat valid(p.height, p.width, CV_8UC1, cv::Scalar(0));
  for (size_t k = 0; k < pixels; ++k) {
    const double x = all[k * stride];
    if (!std::isfinite(x) || x == 0) continue;
    const double t = hi > lo ? (x - lo) / (hi - lo) : 1.0;
    grey.data[k] = static_cast<uint8_t>(std::lround(t * 255));
    valid.data[k] = 1;
  }
  cv::Mat out;
  cv::applyColorMap(grey, out, cv::COLORMAP_VIRIDIS);
  out.setTo(cv::Scalar(0, 0, 0), valid == 0);
  return out;
}

// "...tail" of `key` that fits `width` pixels (non-ASCII bytes as '?': the font is ASCII).
std::string fit_key(const std::string& key, int width, double scale) {
  std::string k = key;
  for (char& c : k)
    if (static_cast<unsigned char>(c) >= 0x80 || static_cast<unsigned char>(c) < 0x20) c = '?';
  int base = 0;
  auto w = [&](const std::string& s) {
    return cv::getTextSize(s, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &base).width;
  };
  if (w(k) <= width) return k;
  for (size_t drop = 1; drop < k.size(); ++drop) {
    std::string t = "..." + k.substr(drop);
    if (w(t) <= width) return t;
  }
  return "...";
}

// What is drawn over the images: --points and --boxes as given, or else the manifest's that the
// dataset still holds; the skeleton given, or else the table's own.
struct Overlays {
  std::vector<std::string> points;
  std::vector<BoxField> boxes;
  std::vector<std::pair<int, int>> skeleton;
};

Overlays chosen_overlays(const Dataset& ds, const SheetOptions& o) {
  std::vector<std::string> points = o.points, box_specs = o.boxes;
  {
    std::vector<std::string> dp, db;
    declared_fields(o.dir, dp, db);
    // The manifest's fields may since have been dropped (--fields): draw those that exist.
    auto present = [&](const std::vector<std::string>& v) {
      std::vector<std::string> out;
      for (const auto& s : v)
        if (ds.find_field(parse_box(s).name)) out.push_back(s);
      return out;
    };
    // `--points none` / `--boxes none`: draw none, not even convert's.
    auto none = [](const std::vector<std::string>& v) { return v.size() == 1 && v[0] == "none"; };
    if (!o.points_given)
      points = present(dp);
    else if (none(points))
      points.clear();
    if (!o.boxes_given)
      box_specs = present(db);
    else if (none(box_specs))
      box_specs.clear();
  }
  // Without --skeleton, a table's own (COCO's categories[0].skeleton, convert --table) is drawn.
  std::vector<std::pair<int, int>> skeleton = o.skeleton;
  if (skeleton.empty())
    if (auto it = ds.metadata().find(format::kMetaTable); it != ds.metadata().end()) {
      const format::TableMetadata t = format::parse_table_metadata(it->second);
      if (!t.categories.empty()) skeleton = t.categories.front().skeleton;
    }
  std::vector<BoxField> boxes;
  boxes.reserve(box_specs.size());
  for (const auto& s : box_specs) boxes.push_back(parse_box(s));
  for (const auto& p : points) check_field(ds, p, "points", 2, true);
  for (const auto& b : boxes) check_field(ds, b.name, "boxes", 4, true);
  return {std::move(points), std::move(boxes), std::move(skeleton)};
}

// Sample `i`'s boxes on its tile, scaled by (sx, sy) from image pixels.
void draw_boxes(cv::Mat& tile, const Dataset& ds, size_t i, const std::vector<BoxField>& boxes,
                double sx, double sy) {
  for (size_t b = 0; b < boxes.size(); ++b) {
    if (!ds.has_value(boxes[b].name, i)) continue;
    const TensorView v = ds.value(boxes[b].name, i);
    const std::vector<double> d = as_doubles(v);
    // A box is the first 4 values of each row; the others (a confidence) are not drawn.
    const auto stride = v.shape.ndim > 0 ? static_cast<size_t>(v.shape[v.shape.ndim - 1]) : 0;
    for (size_t k = 0; stride >= 4 && k + stride <= d.size(); k += stride) {
      const double x1 = boxes[b].xyxy ? d[k + 2] : d[k] + d[k + 2];
      const double y1 = boxes[b].xyxy ? d[k + 3] : d[k + 1] + d[k + 3];
      if (!std::isfinite(d[k]) || !std::isfinite(d[k + 1]) || !std::isfinite(x1) ||
          !std::isfinite(y1))
        continue;
      const cv::Point2d a = scaled(d[k], d[k + 1], sx, sy), c = scaled(x1, y1, sx, sy);
      cv::rectangle(tile, cv::Point(int(std::lround(a.x)), int(std::lround(a.y))),
                    cv::Point(int(std::lround(c.x)), int(std::lround(c.y))),
                    kBoxColours[b % std::size(kBoxColours)], 2, cv::LINE_8);
    }
  }
}

// Sample `i`'s points (dots of `radius`) and their skeleton lines on its tile.
void draw_points(cv::Mat& tile, const Dataset& ds, size_t i, const Overlays& ov, double sx,
                 double sy, int radius) {
  const std::vector<std::string>& points = ov.points;
  for (size_t p = 0; p < points.size(); ++p) {
    if (!ds.has_value(points[p], i)) continue;
    const TensorView v = ds.value(points[p], i);
    const std::vector<double> d = as_doubles(v);
    const size_t stride = static_cast<size_t>(v.shape[v.shape.ndim - 1]);
    // Joints per instance: the axis before x, y (a [K, 2|3] field is one instance).
    const size_t joints =
        v.shape.ndim >= 2 ? static_cast<size_t>(v.shape[v.shape.ndim - 2]) : size_t{1};
    const size_t count = stride ? d.size() / stride : 0;
    // A third column of 0 is COCO's "not labelled" (v = 0): not drawn, nor its lines.
    auto drawn = [&](size_t j) {
      const double x = d[j * stride], y = d[j * stride + 1];
      return std::isfinite(x) && std::isfinite(y) && !(stride == 3 && d[j * stride + 2] == 0);
    };
    auto at = [&](size_t j) {
      const cv::Point2d q = scaled(d[j * stride], d[j * stride + 1], sx, sy);
      return cv::Point(int(std::lround(q.x)), int(std::lround(q.y)));
    };
    const cv::Scalar colour = kPointColours[p % std::size(kPointColours)];
    if (joints > 0)
      for (size_t first = 0; first + joints <= count; first += joints)
        for (const auto& [a, b] : ov.skeleton) {
          const size_t ja = first + size_t(a) - 1, jb = first + size_t(b) - 1;
          if (size_t(a) > joints || size_t(b) > joints || !drawn(ja) || !drawn(jb)) continue;
          cv::line(tile, at(ja), at(jb), colour, 1, cv::LINE_8);
        }
    for (size_t j = 0; j < count; ++j)
      if (drawn(j)) cv::circle(tile, at(j), radius, colour, cv::FILLED, cv::LINE_8);
  }
}

// One cell of the sheet: sample `i`'s image with its overlays, its dense maps beside it (all
// `th` high), and `key` as the caption below.
cv::Mat sample_cell(const Dataset& ds, size_t i, const Overlays& ov,
                    const std::vector<std::string>& dense, int th, const std::string& key) {
  const int radius = std::max(2, th / 80);
  const double font = 0.45;
  const auto [w, h] = ds.decoded_size(i);
  const int tw = std::max(1, static_cast<int>(std::lround(double(w) * th / h)));
  Pixels px;
  px.width = w;
  px.height = h;
  px.channels = 3;
  px.data.resize(size_t(w) * size_t(h) * 3);
  ds.decode_into(i, px.data, w, h, false, 3);
  cv::Mat tile = to_bgr_tile(px, tw, th);
  const double sx = double(tw) / w, sy = double(th) / h;
  draw_boxes(tile, ds, i, ov.boxes, sx, sy);
  draw_points(tile, ds, i, ov, sx, sy, radius);

  std::vector<cv::Mat> parts{tile};
  for (const auto& kind : dense) {
    const Pixels dp = ds.decode_dense(i, kind);
    cv::Mat c = colour_dense(dp), scaled_map;
    const int dw = std::max(1, static_cast<int>(std::lround(double(dp.width) * th / dp.height)));
    cv::resize(c, scaled_map, cv::Size(dw, th), 0, 0, cv::INTER_NEAREST);
    parts.push_back(scaled_map);
  }
  int cw = 0;
  for (const auto& m : parts) cw += m.cols;
  cw += kGap * static_cast<int>(parts.size() - 1);
  cv::Mat cell(th + kCaption, cw, CV_8UC3, kBackground);
  int x = 0;
  for (const auto& m : parts) {
    m.copyTo(cell(cv::Rect(x, 0, m.cols, th)));
    x += m.cols + kGap;
  }
  cv::putText(cell, fit_key(key, cw - 4, font), cv::Point(2, th + kCaption - 6),
              cv::FONT_HERSHEY_SIMPLEX, font, kText, 1, cv::LINE_AA);
  return cell;
}

// The cells in a grid near square, row-major; a column is as wide as its widest cell.
cv::Mat grid_of(const std::vector<cv::Mat>& cells, int th) {
  const size_t count = cells.size();
  const size_t cols = static_cast<size_t>(std::ceil(std::sqrt(double(count))));
  const size_t rows = (count + cols - 1) / cols;
  std::vector<int> col_w(cols, 0);
  for (size_t k = 0; k < count; ++k) col_w[k % cols] = std::max(col_w[k % cols], cells[k].cols);
  int width = 2 * kMargin - kGap, height = 2 * kMargin - kGap;
  for (int w : col_w) width += w + kGap;
  height += static_cast<int>(rows) * (th + kCaption + kGap);
  cv::Mat out(height, width, CV_8UC3, kBackground);
  for (size_t k = 0; k < count; ++k) {
    int x = kMargin;
    for (size_t c = 0; c < k % cols; ++c) x += col_w[c] + kGap;
    const int y = kMargin + static_cast<int>(k / cols) * (th + kCaption + kGap);
    cells[k].copyTo(out(cv::Rect(x, y, cells[k].cols, cells[k].rows)));
  }
  return out;
}

}  // namespace

std::vector<std::pair<int, int>> parse_skeleton(const std::string& text) {
  if (text == "coco") return {std::begin(kCocoSkeleton), std::end(kCocoSkeleton)};
  // A 1-based joint index, the whole text: "1" (not " 1", "+1", "1.0" or "1x").
  const auto joint = [](std::string_view s, int& out) {
    const auto n = parse_integer(s);
    if (!n.ok() || n.value < 1 || n.value > kMaxSkeletonJoint) return false;
    out = static_cast<int>(n.value);
    return true;
  };
  std::vector<std::pair<int, int>> out;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view pair = std::string_view(text).substr(at, comma - at);
    const size_t dash = pair.find('-');
    int a = 0, b = 0;
    if (dash == std::string_view::npos || !joint(pair.substr(0, dash), a) ||
        !joint(pair.substr(dash + 1), b))
      throw ArgumentError("--skeleton: '" + std::string(pair) +
                          "' is not a pair A-B; accepted: coco, or pairs A-B,C-D,... of 1-based "
                          "joint indices, integers in [1, " +
                          std::to_string(kMaxSkeletonJoint) + "]");
    out.emplace_back(a, b);
    at = comma + 1;
  }
  return out;
}

Sheet draw_contact_sheet(const SheetOptions& o, bool jpeg) {
  if (o.n == 0 && o.keys.empty()) throw ArgumentError("--n must be at least 1");
  if (o.tile_height < 16 || o.tile_height > 4096)
    throw ArgumentError("--tile-height must be between 16 and 4096");
  const Dataset ds(o.dir);
  if (!ds.has_images())
    throw FatalError("nothing to draw: '" + o.dir +
                     "' is a labels-only dataset (converted with --no-images); 'tarmac cat " +
                     o.dir + " --labels' shows its labels");
  if (ds.size() == 0) throw FatalError("nothing to draw: '" + o.dir + "' holds no samples");

  const Overlays ov = chosen_overlays(ds, o);
  Sheet sheet;
  sheet.points = ov.points;
  for (const auto& b : ov.boxes) sheet.boxes.push_back(b.name);
  std::vector<std::string> dense(ds.blob_kinds().begin() + 1, ds.blob_kinds().end());
  sheet.dense = dense;

  const std::vector<size_t> picked = pick_samples(ds, o);
  std::vector<cv::Mat> cells;
  for (size_t i : picked) {
    const std::string key(ds.key(i));
    cells.push_back(sample_cell(ds, i, ov, dense, o.tile_height, key));
    sheet.keys.push_back(key);
  }
  const cv::Mat out = grid_of(cells, o.tile_height);
  sheet.width = out.cols;
  sheet.height = out.rows;
  sheet.png = encode_image(out, jpeg ? OutputFormat::Jpeg : OutputFormat::Png, 90);
  return sheet;
}

}  // namespace tarmac::preview
