#include "transform/geometry.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include "common/error.h"

namespace tarmac {

Region region_from_box(const double* v, bool xyxy) {
  if (xyxy) return {v[0], v[1], v[2], v[3]};
  return {v[0], v[1], v[0] + v[2], v[1] + v[3]};
}

namespace {

Region scale_about_centre(Region r, double sx, double sy) {
  const double cx = (r.x0 + r.x1) / 2, cy = (r.y0 + r.y1) / 2;
  const double hw = r.width() * sx / 2, hh = r.height() * sy / 2;
  return {cx - hw, cy - hh, cx + hw, cy + hh};
}

int round_size(double v) {
  return std::max(1, static_cast<int>(std::lround(v)));
}

// The largest region centred in r with aspect ratio a = width / height.
Region centred_with_aspect(const Region& r, double a) {
  double cw = r.width(), ch = r.height();
  if (cw / ch > a)
    cw = ch * a;
  else
    ch = cw / a;
  const double cx = (r.x0 + r.x1) / 2, cy = (r.y0 + r.y1) / 2;
  return {cx - cw / 2, cy - ch / 2, cx + cw / 2, cy + ch / 2};
}

}  // namespace

std::vector<std::pair<int, int>> aspect_buckets(int64_t area, int step, double max_ratio) {
  std::vector<std::pair<int, int>> out;
  if (step <= 0 || area < int64_t{step} * step) return out;
  // Widths below sqrt(area) - 2 * step have a tallest height above them (portrait, skipped):
  // start near the square, so the loop is O(sqrt(area * max_ratio) / step), not O(area / step).
  const auto root = static_cast<int64_t>(std::sqrt(static_cast<double>(area)));
  for (int64_t w = std::max<int64_t>(step, (root / step - 2) * step); w * step <= area; w += step) {
    const int64_t h = area / w / step * step;
    if (h > w) continue;  // portrait buckets are the landscape ones transposed
    if (static_cast<double>(w) > max_ratio * (1 + 1e-12) * static_cast<double>(h)) break;
    out.emplace_back(static_cast<int>(w), static_cast<int>(h));
    if (w != h) out.emplace_back(static_cast<int>(h), static_cast<int>(w));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::pair<int, int> choose_bucket(const std::vector<std::pair<int, int>>& buckets, double w,
                                  double h) {
  const double target = std::log(w / h);
  const std::pair<int, int>* best = &buckets.front();
  double best_d = std::abs(std::log(static_cast<double>(best->first) / best->second) - target);
  for (const auto& b : buckets) {
    const double d = std::abs(std::log(static_cast<double>(b.first) / b.second) - target);
    const int64_t area = int64_t{b.first} * b.second,
                  best_area = int64_t{best->first} * best->second;
    // 1e-12: equal distances computed through different logs must still tie.
    const bool tie = std::abs(d - best_d) <= 1e-12;
    if (d < best_d - 1e-12 || (tie && area > best_area) ||
        (tie && area == best_area && b.first < best->first)) {
      best = &b;
      best_d = d;
    }
  }
  return *best;
}

namespace {

// A crop box (--crop-box or a field's), checked, in pixel-centre coordinates, scaled, squared
// and widened to the output's aspect as the options ask.
Region adjusted_box(Region r, const GeometryOptions& o) {
  if (!(r.width() > 0 && r.height() > 0) || !std::isfinite(r.x0) || !std::isfinite(r.y0) ||
      !std::isfinite(r.x1) || !std::isfinite(r.y1))
    throw SampleError("crop box is empty or not finite (x0=" + std::to_string(r.x0) +
                          " y0=" + std::to_string(r.y0) + " x1=" + std::to_string(r.x1) +
                          " y1=" + std::to_string(r.y1) + ")",
                      ErrorCode::BadField);
  r = centre_coordinates(r, o.box_convention);
  if (o.crop_scale != 1.0) r = scale_about_centre(r, o.crop_scale, o.crop_scale);
  if (o.square) {
    const double side = std::max(r.width(), r.height());
    r = scale_about_centre(r, side / r.width(), side / r.height());
  }
  if (o.fit_aspect && o.width > 0 && o.height > 0) {
    const double aspect = static_cast<double>(o.width) / o.height;
    if (r.width() / r.height() > aspect)
      r = scale_about_centre(r, 1.0, r.width() / aspect / r.height());
    else
      r = scale_about_centre(r, r.height() * aspect / r.width(), 1.0);
  }
  return r;
}

// The region of a w x h image that --crop keeps (before a bucket's aspect is cut from it).
Region crop_region(const GeometryOptions& o, int w, int h, const std::optional<Region>& field_box) {
  const Region full{-0.5, -0.5, w - 0.5, h - 0.5};
  Region r = full;
  switch (o.crop) {
    case CropMode::None:
      break;
    case CropMode::Center: {
      if (o.resize == ResizeMode::Bucket) break;  // cut to the bucket's aspect below
      const double aspect =
          (o.width > 0 && o.height > 0) ? static_cast<double>(o.width) / o.height : 1.0;
      double cw = w, ch = h;
      if (static_cast<double>(w) / h > aspect)
        cw = h * aspect;
      else
        ch = w / aspect;
      r = {(w - cw) / 2 - 0.5, (h - ch) / 2 - 0.5, (w + cw) / 2 - 0.5, (h + ch) / 2 - 0.5};
      break;
    }
    case CropMode::Box:
      r = o.box;
      break;
    case CropMode::Field:
      if (!field_box) throw SampleError("crop box field is missing", ErrorCode::BadField);
      r = *field_box;
      break;
  }
  if (o.crop == CropMode::Box || o.crop == CropMode::Field) r = adjusted_box(r, o);
  return r;
}

// The aspect bucket (width, height) of --resize bucket for a region of rw x rh.
std::pair<int, int> bucket_for(const GeometryOptions& o, double rw, double rh) {
  // The same list for every sample of a run: made once per thread and options.
  thread_local std::tuple<int64_t, int, double> key{-1, 0, 0};
  thread_local std::vector<std::pair<int, int>> buckets;
  const std::tuple<int64_t, int, double> want{int64_t{o.width} * o.height, o.bucket_step,
                                              o.bucket_max_ratio};
  if (want != key) {
    buckets = aspect_buckets(std::get<0>(want), o.bucket_step, o.bucket_max_ratio);
    key = want;
  }
  if (buckets.empty())
    throw InternalError("no aspect bucket: --size area below --bucket-step squared");
  return choose_bucket(buckets, rw, rh);
}

// g's output size for a region of rw x rh under --resize (a bucket's is set already).
void set_output_size(const GeometryOptions& o, double rw, double rh, Geometry& g) {
  switch (o.resize) {
    case ResizeMode::Bucket:
      break;
    case ResizeMode::Exact:
      g.out_width = o.width;
      g.out_height = o.height;
      break;
    case ResizeMode::Shorter: {
      const double s = o.width / std::min(rw, rh);
      g.out_width = round_size(rw * s);
      g.out_height = round_size(rh * s);
      break;
    }
    case ResizeMode::Longer: {
      const double s = o.width / std::max(rw, rh);
      g.out_width = round_size(rw * s);
      g.out_height = round_size(rh * s);
      break;
    }
    case ResizeMode::Fit: {
      const double s = std::min(o.width / rw, o.height / rh);
      g.out_width = round_size(rw * s);
      g.out_height = round_size(rh * s);
      break;
    }
    case ResizeMode::None:
      g.out_width = round_size(rw);
      g.out_height = round_size(rh);
      break;
  }
}

}  // namespace

Geometry compute_geometry(const GeometryOptions& o, int w, int h,
                          const std::optional<Region>& field_box) {
  Region r = crop_region(o, w, h, field_box);
  Geometry g;
  if (o.resize == ResizeMode::Bucket) {
    const auto [bw, bh] = bucket_for(o, r.width(), r.height());
    r = centred_with_aspect(r, static_cast<double>(bw) / bh);
    g.out_width = bw;
    g.out_height = bh;
  }
  const double rw = r.width(), rh = r.height();
  set_output_size(o, rw, rh, g);
  const double sx = g.out_width / rw, sy = g.out_height / rh;
  g.m = {sx, 0, -r.x0 * sx - 0.5, 0, sy, -r.y0 * sy - 0.5};
  g.identity = g.out_width == w && g.out_height == h && std::abs(g.m[0] - 1) < 1e-12 &&
               std::abs(g.m[4] - 1) < 1e-12 && std::abs(g.m[2]) < 1e-9 && std::abs(g.m[5]) < 1e-9;
  return g;
}

}  // namespace tarmac
