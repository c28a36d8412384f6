#include "read/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <string>

#include "common/error.h"

namespace tarmac {
namespace {

using Mat = std::array<double, 6>;

// a * b: apply b first.
Mat compose(const Mat& a, const Mat& b) {
  return {a[0] * b[0] + a[1] * b[3], a[0] * b[1] + a[1] * b[4], a[0] * b[2] + a[1] * b[5] + a[2],
          a[3] * b[0] + a[4] * b[3], a[3] * b[1] + a[4] * b[4], a[3] * b[2] + a[4] * b[5] + a[5]};
}

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Draw numbers: fixed per parameter, so that enabling one never shifts another's values.
enum : uint64_t { kFlip = 0, kAngle = 1, kScale = 2, kTx = 3, kTy = 4, kCrop = 8 };

void check_finite(double v, const char* name) {
  if (!std::isfinite(v)) throw ArgumentError(std::string("augment ") + name + " must be finite");
}

// torchvision's RandomResizedCrop.get_params, its draws taken from the sample's stream.
void draw_crop(const Augment& a, int w0, int h0, uint64_t seed, uint64_t epoch, uint64_t index,
               AugmentDraw& d) {
  const double area = double(w0) * double(h0);
  const double lr0 = std::log(a.ratio_min), lr1 = std::log(a.ratio_max);
  for (uint64_t t = 0; t < 10; ++t) {
    const uint64_t k = kCrop + 4 * t;
    const double target =
        area * (a.crop_min + (a.crop_max - a.crop_min) * augment_uniform(seed, epoch, index, k));
    const double ar = std::exp(lr0 + (lr1 - lr0) * augment_uniform(seed, epoch, index, k + 1));
    // Python's round() (half to even) is the default rounding mode's nearbyint.
    const double w = std::nearbyint(std::sqrt(target * ar));
    const double h = std::nearbyint(std::sqrt(target / ar));
    if (w > 0 && w <= w0 && h > 0 && h <= h0) {
      const int iw = int(w), ih = int(h);
      auto below = [&](int n, uint64_t kk) {  // uniform in [0, n)
        return std::min(n - 1, int(augment_uniform(seed, epoch, index, kk) * n));
      };
      d.crop_y = below(h0 - ih + 1, k + 2);
      d.crop_x = below(w0 - iw + 1, k + 3);
      d.crop_w = iw;
      d.crop_h = ih;
      return;
    }
  }
  const double in_ratio = double(w0) / double(h0);
  int w = w0, h = h0;
  if (in_ratio < a.ratio_min)
    h = int(std::nearbyint(w0 / a.ratio_min));
  else if (in_ratio > a.ratio_max)
    w = int(std::nearbyint(h0 * a.ratio_max));
  d.crop_w = std::max(1, w);
  d.crop_h = std::max(1, h);
  d.crop_x = (w0 - d.crop_w) / 2;
  d.crop_y = (h0 - d.crop_h) / 2;
}

template <class T>
void points_of(const AugmentDraw& d, const Augment& a, std::span<const int64_t> shape, T* v) {
  const int64_t c = shape.back();
  const int64_t k = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  int64_t rows = 1;
  for (int64_t s : shape) rows *= s;
  rows /= c;
  for (int64_t r = 0; r < rows; ++r) {
    T* p = v + r * c;
    const double x = double(p[0]), y = double(p[1]);
    p[0] = T(d.m[0] * x + d.m[1] * y + d.m[2]);
    p[1] = T(d.m[3] * x + d.m[4] * y + d.m[5]);
  }
  if (!d.flip || shape.size() < 2) return;
  for (int64_t g = 0; g < rows / k; ++g)
    for (const auto& [i, j] : a.flip_pairs)
      std::swap_ranges(v + (g * k + i) * c, v + (g * k + i + 1) * c, v + (g * k + j) * c);
}

template <class T>
void boxes_of(const AugmentDraw& d, std::span<const int64_t> shape, bool xyxy, bool edges, T* v) {
  const double half = edges ? 0.5 : 0.0;  // edge coordinates are centre ones + 0.5
  const int64_t c = shape.back();
  int64_t rows = 1;
  for (int64_t s : shape) rows *= s;
  rows /= c;
  for (int64_t r = 0; r < rows; ++r) {
    T* b = v + r * c;
    const double x0 = double(b[0]) - half, y0 = double(b[1]) - half;
    const double x1 = (xyxy ? double(b[2]) : double(b[0]) + double(b[2])) - half;
    const double y1 = (xyxy ? double(b[3]) : double(b[1]) + double(b[3])) - half;
    double lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
    for (const double x : {x0, x1})
      for (const double y : {y0, y1}) {
        const double ox = d.m[0] * x + d.m[1] * y + d.m[2] + half;
        const double oy = d.m[3] * x + d.m[4] * y + d.m[5] + half;
        lo_x = std::min(lo_x, ox), hi_x = std::max(hi_x, ox);
        lo_y = std::min(lo_y, oy), hi_y = std::max(hi_y, oy);
      }
    b[0] = T(lo_x);
    b[1] = T(lo_y);
    b[2] = T(xyxy ? hi_x : hi_x - lo_x);
    b[3] = T(xyxy ? hi_y : hi_y - lo_y);
  }
}

using Mat3 = std::array<double, 9>;  // row-major

Mat3 mul3(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) c[3 * i + j] += a[3 * i + k] * b[3 * k + j];
  return c;
}

Mat3 transpose3(const Mat3& a) {
  return {a[0], a[3], a[6], a[1], a[4], a[7], a[2], a[5], a[8]};
}

// Rodrigues' formula: the rotation of axis-angle w (angle |w| radians about w / |w|).
Mat3 rotation_of(const double w[3]) {
  const double t = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
  if (t < 1e-300) return {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const double x = w[0] / t, y = w[1] / t, z = w[2] / t;
  const double c = std::cos(t), s = std::sin(t), v = 1 - c;
  return {c + x * x * v,     x * y * v - z * s, x * z * v + y * s, y * x * v + z * s, c + y * y * v,
          y * z * v - x * s, z * x * v - y * s, z * y * v + x * s, c + z * z * v};
}

// The axis-angle of rotation r, angle in [0, pi], through its unit quaternion (Shepperd's
// choice of the largest component, so it holds near angle pi where the skew part vanishes).
void axis_angle_of(const Mat3& r, double w[3]) {
  const double tr = r[0] + r[4] + r[8];
  double q[4];  // w, x, y, z
  if (tr >= r[0] && tr >= r[4] && tr >= r[8]) {
    const double s = 2 * std::sqrt(std::max(0.0, 1 + tr));
    q[0] = s / 4, q[1] = (r[7] - r[5]) / s, q[2] = (r[2] - r[6]) / s, q[3] = (r[3] - r[1]) / s;
  } else if (r[0] >= r[4] && r[0] >= r[8]) {
    const double s = 2 * std::sqrt(std::max(0.0, 1 + r[0] - r[4] - r[8]));
    q[0] = (r[7] - r[5]) / s, q[1] = s / 4, q[2] = (r[1] + r[3]) / s, q[3] = (r[2] + r[6]) / s;
  } else if (r[4] >= r[8]) {
    const double s = 2 * std::sqrt(std::max(0.0, 1 + r[4] - r[0] - r[8]));
    q[0] = (r[2] - r[6]) / s, q[1] = (r[1] + r[3]) / s, q[2] = s / 4, q[3] = (r[5] + r[7]) / s;
  } else {
    const double s = 2 * std::sqrt(std::max(0.0, 1 + r[8] - r[0] - r[4]));
    q[0] = (r[3] - r[1]) / s, q[1] = (r[2] + r[6]) / s, q[2] = (r[5] + r[7]) / s, q[3] = s / 4;
  }
  if (q[0] < 0)
    for (double& v : q) v = -v;
  const double n = std::sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  const double angle = 2 * std::atan2(n, q[0]);
  const double k = n > 1e-300 ? angle / n : 2.0 / q[0];  // small angles: w ~ 2 v
  for (int i = 0; i < 3; ++i) w[i] = q[i + 1] * k;
}

int64_t elements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Swaps the rows of each pair in every group of k rows of c values.
template <class T>
void swap_pairs(T* v, int64_t rows, int64_t k, int64_t c,
                std::span<const std::pair<int, int>> pairs) {
  for (int64_t g = 0; g < rows / k; ++g)
    for (const auto& [i, j] : pairs)
      std::swap_ranges(v + (g * k + i) * c, v + (g * k + i + 1) * c, v + (g * k + j) * c);
}

template <class T>
void points3d_of(const Mat3& f, bool flip, std::span<const std::pair<int, int>> pairs,
                 std::span<const int64_t> shape, T* v) {
  const int64_t c = shape.back();
  const int64_t rows = elements(shape) / c;
  for (int64_t r = 0; r < rows; ++r) {
    T* p = v + r * c;
    const double x = double(p[0]), y = double(p[1]), z = double(p[2]);
    for (int i = 0; i < 3; ++i) p[i] = T(f[3 * i] * x + f[3 * i + 1] * y + f[3 * i + 2] * z);
  }
  if (flip && shape.size() >= 2) swap_pairs(v, rows, shape[shape.size() - 2], c, pairs);
}

template <class T>
void axis_angle_values(const Mat3& rz, bool flip, bool rotate, int64_t joints,
                       std::span<const std::pair<int, int>> pairs, int64_t n, T* v) {
  const int64_t rows = n / 3;
  if (flip) {
    swap_pairs(v, rows, joints, 3, pairs);
    for (int64_t r = 0; r < rows; ++r) v[3 * r + 1] = -v[3 * r + 1], v[3 * r + 2] = -v[3 * r + 2];
  }
  if (!rotate) return;
  for (int64_t r = 0; r < rows; r += joints) {
    double w[3] = {double(v[3 * r]), double(v[3 * r + 1]), double(v[3 * r + 2])};
    axis_angle_of(mul3(rz, rotation_of(w)), w);
    for (int i = 0; i < 3; ++i) v[3 * r + i] = T(w[i]);
  }
}

template <class T>
void camera_values(const Mat3& k_map, const Mat3& gt, bool matrix, int64_t n, T* v) {
  const int64_t each = matrix ? 9 : 4;
  for (int64_t g = 0; g < n / each; ++g) {
    T* p = v + g * each;
    Mat3 k;
    if (matrix)
      for (int i = 0; i < 9; ++i) k[i] = double(p[i]);
    else
      k = {double(p[0]), 0, double(p[2]), 0, double(p[1]), double(p[3]), 0, 0, 1};
    const Mat3 out = mul3(mul3(k_map, k), gt);
    if (matrix)
      for (int i = 0; i < 9; ++i) p[i] = T(out[i]);
    else
      p[0] = T(out[0]), p[1] = T(out[4]), p[2] = T(out[2]), p[3] = T(out[5]);
  }
}

template <class F>
void by_dtype(DType dtype, const char* what, std::span<uint8_t> value, F&& f) {
  if (dtype == DType::F64)
    f(reinterpret_cast<double*>(value.data()));
  else if (dtype == DType::F32)
    f(reinterpret_cast<float*>(value.data()));
  else
    throw ArgumentError(std::string("augmentation transforms F32 or F64 ") + what + ", not " +
                        std::string(dtype_name(dtype)));
}

}  // namespace

void check_augment(const Augment& a) {
  if (a.width <= 0 || a.height <= 0)
    throw ArgumentError("augment size must be positive, not " + std::to_string(a.height) + "x" +
                        std::to_string(a.width) + " (height x width)");
  for (auto [v, name] : {std::pair{a.flip, "flip"},
                         {a.rotate, "rotate"},
                         {a.scale_min, "scale"},
                         {a.scale_max, "scale"},
                         {a.translate, "translate"},
                         {a.crop_min, "crop"},
                         {a.crop_max, "crop"},
                         {a.ratio_min, "ratio"},
                         {a.ratio_max, "ratio"},
                         {a.fill, "fill"}})
    check_finite(v, name);
  auto within = [](double v, double lo, double hi, const char* name, const char* range) {
    if (v < lo || v > hi)
      throw ArgumentError(std::string("augment ") + name + " must be in " + range + ", not " +
                          std::to_string(v));
  };
  within(a.flip, 0, 1, "flip", "[0, 1] (a probability)");
  within(a.rotate, 0, kMaxRotate, "rotate", "[0, 180] degrees");
  within(a.translate, 0, kMaxTranslate, "translate", "[0, 8] (fractions of the output size)");
  within(a.fill, 0, 255, "fill", "[0, 255]");
  if (a.scale_min <= 0 || a.scale_min > a.scale_max || a.scale_max > kMaxScale)
    throw ArgumentError("augment scale must be (min, max) with 0 < min <= max <= 64");
  if (a.crop && (a.crop_min <= 0 || a.crop_max > 1 || a.crop_min > a.crop_max))
    throw ArgumentError("augment crop must be (min, max) with 0 < min <= max <= 1");
  if (a.crop && (a.ratio_min < kMinRatio || a.ratio_min > a.ratio_max || a.ratio_max > kMaxRatio))
    throw ArgumentError("augment ratio must be (min, max) with 1/64 <= min <= max <= 64");
  std::map<int, std::pair<int, int>> seen;  // index -> the pair that named it first
  for (const auto& p : a.flip_pairs) {
    const auto [i, j] = p;
    const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
    if (i < 0 || j < 0)
      throw ArgumentError("augment flip_pairs holds a negative index " + pair + " (0-based)");
    if (i == j)
      throw ArgumentError("augment flip_pairs pair " + pair + " pairs a point with itself");
    for (const int v : {i, j})
      if (const auto [at, fresh] = seen.emplace(v, p); !fresh)
        throw ArgumentError(
            "augment flip_pairs pair " + pair + " names index " + std::to_string(v) +
            " again (also in (" + std::to_string(at->second.first) + ", " +
            std::to_string(at->second.second) + ")): each point is in one pair at most");
  }
}

double augment_uniform(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t k) {
  const uint64_t h = mix(mix(mix(mix(seed) ^ epoch) ^ index) ^ k);
  return double(h >> 11) * 0x1.0p-53;
}

AugmentDraw draw_augment(const Augment& a, int src_w, int src_h, uint64_t seed, uint64_t epoch,
                         uint64_t index) {
  AugmentDraw d;
  auto u = [&](uint64_t k) { return augment_uniform(seed, epoch, index, k); };
  d.flip = u(kFlip) < a.flip;
  d.angle = a.rotate * (2 * u(kAngle) - 1);
  d.scale = a.scale_min + (a.scale_max - a.scale_min) * u(kScale);
  d.tx = a.translate * a.width * (2 * u(kTx) - 1);
  d.ty = a.translate * a.height * (2 * u(kTy) - 1);
  d.crop_w = src_w;
  d.crop_h = src_h;
  if (a.crop) draw_crop(a, src_w, src_h, seed, epoch, index, d);
  // C: the crop region [x - 0.5, x + w - 0.5] onto [-0.5, W - 0.5] (format.md 3).
  const double sx = double(a.width) / d.crop_w, sy = double(a.height) / d.crop_h;
  const Mat c = {sx, 0, -(d.crop_x - 0.5) * sx - 0.5, 0, sy, -(d.crop_y - 0.5) * sy - 0.5};
  const Mat f = d.flip ? Mat{-1, 0, double(a.width - 1), 0, 1, 0} : Mat{1, 0, 0, 0, 1, 0};
  const double t = d.angle * std::numbers::pi / 180;
  const double ca = d.scale * std::cos(t), sa = d.scale * std::sin(t);
  const double cx = (a.width - 1) / 2.0, cy = (a.height - 1) / 2.0;
  const Mat r = {ca, sa, (1 - ca) * cx - sa * cy + d.tx, -sa, ca, sa * cx + (1 - ca) * cy + d.ty};
  d.m = compose(r, compose(f, c));
  return d;
}

AugmentSource augment_source(const std::array<double, 6>& m, int out_w, int out_h, int src_w,
                             int src_h, int max_denom) {
  const double a = m[0], b = m[1], c = m[3], d = m[4];
  const double det = a * d - b * c;
  const double s = a * a + b * b + c * c + d * d;
  const double sigma = std::sqrt((s + std::sqrt(std::max(0.0, s * s - 4 * det * det))) / 2);
  AugmentSource r;
  while (r.denom * 2 <= max_denom && r.denom * 2 * sigma <= 1 + 1e-9) r.denom *= 2;
  // The output's corner pixel centres mapped back: their box holds every output pixel's.
  double lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
  for (const double ox : {0.0, double(out_w - 1)})
    for (const double oy : {0.0, double(out_h - 1)}) {
      const double px = ox - m[2], py = oy - m[5];
      // Full-resolution u, then the scaled image's (u + 0.5) / denom - 0.5.
      const double x = (d * px - b * py) / det, y = (a * py - c * px) / det;
      const double sx = (x + 0.5) / r.denom - 0.5, sy = (y + 0.5) / r.denom - 0.5;
      lo_x = std::min(lo_x, sx), hi_x = std::max(hi_x, sx);
      lo_y = std::min(lo_y, sy), hi_y = std::max(hi_y, sy);
    }
  const double sw = (src_w + r.denom - 1) / r.denom, sh = (src_h + r.denom - 1) / r.denom;
  // Bilinear taps at floor(p) and floor(p) + 1; one pixel more on each side for warpAffine's
  // 1/32 rounding and because a cropped JPEG decode's edge columns may be a few levels off.
  auto clip = [](double v, double hi) { return int(std::clamp(v, 0.0, hi)); };
  r.x0 = clip(std::floor(lo_x) - 1, sw);
  r.x1 = clip(std::floor(hi_x) + 3, sw);
  r.y0 = clip(std::floor(lo_y) - 1, sh);
  r.y1 = clip(std::floor(hi_y) + 3, sh);
  return r;
}

void augment_points(const AugmentDraw& d, const Augment& a, DType dtype,
                    std::span<const int64_t> shape, std::span<uint8_t> value) {
  if (shape.empty() || shape.back() < 2)
    throw ArgumentError("a points field needs a last axis of at least 2 values (x, y)");
  if (dtype == DType::F64)
    points_of(d, a, shape, reinterpret_cast<double*>(value.data()));
  else if (dtype == DType::F32)
    points_of(d, a, shape, reinterpret_cast<float*>(value.data()));
  else
    throw ArgumentError("augmentation transforms F32 or F64 points, not " +
                        std::string(dtype_name(dtype)));
}

void augment_boxes(const AugmentDraw& d, DType dtype, std::span<const int64_t> shape, bool xyxy,
                   bool edges, std::span<uint8_t> value) {
  if (shape.empty() || shape.back() < 4)
    throw ArgumentError("a boxes field needs a last axis of at least 4 values");
  if (dtype == DType::F64)
    boxes_of(d, shape, xyxy, edges, reinterpret_cast<double*>(value.data()));
  else if (dtype == DType::F32)
    boxes_of(d, shape, xyxy, edges, reinterpret_cast<float*>(value.data()));
  else
    throw ArgumentError("augmentation transforms F32 or F64 boxes, not " +
                        std::string(dtype_name(dtype)));
}

std::array<double, 9> augment_frame(const AugmentDraw& d) {
  const double t = d.angle * std::numbers::pi / 180;
  const double c = std::cos(t), s = std::sin(t);
  const double fx = d.flip ? -1 : 1;
  // Rz * S: S negates x, Rz's xy block is the image rotation's [[c, s], [-s, c]].
  return {c * fx, s, 0, -s * fx, c, 0, 0, 0, 1};
}

void augment_points3d(const AugmentDraw& d, const Augment& a, DType dtype,
                      std::span<const int64_t> shape, std::span<uint8_t> value) {
  if (shape.empty() || shape.back() < 3)
    throw ArgumentError("a points3d field needs a last axis of at least 3 values (x, y, z)");
  const Mat3 f = augment_frame(d);
  by_dtype(dtype, "points3d", value,
           [&](auto* v) { points3d_of(f, d.flip, a.flip_pairs, shape, v); });
}

void augment_axis_angle(const AugmentDraw& d, DType dtype, int64_t joints,
                        std::span<const std::pair<int, int>> pairs, bool rotate_root,
                        std::span<uint8_t> value) {
  const int64_t n = int64_t(value.size() / dtype_size(dtype));
  if (joints <= 0 || n % (3 * joints) != 0)
    throw ArgumentError("an axis-angle value of " + std::to_string(n) +
                        " numbers is not groups of " + std::to_string(joints) + " x 3");
  const double t = d.angle * std::numbers::pi / 180;
  const double c = std::cos(t), s = std::sin(t);
  const Mat3 rz = {c, s, 0, -s, c, 0, 0, 0, 1};
  const bool rotate = rotate_root && d.angle != 0;
  by_dtype(dtype, "axis-angle values", value,
           [&](auto* v) { axis_angle_values(rz, d.flip, rotate, joints, pairs, n, v); });
}

void augment_camera(const AugmentDraw& d, DType dtype, bool matrix, bool edges,
                    std::span<uint8_t> value) {
  const int64_t n = int64_t(value.size() / dtype_size(dtype));
  if (n == 0 || n % (matrix ? 9 : 4) != 0)
    throw ArgumentError("a camera value of " + std::to_string(n) + " numbers is not " +
                        (matrix ? "[3, 3] K" : "[4] fx, fy, cx, cy"));
  Mat3 a = {d.m[0], d.m[1], d.m[2], d.m[3], d.m[4], d.m[5], 0, 0, 1};
  if (edges) {  // edge coordinates are centre ones + 0.5: T(0.5) A T(-0.5)
    a[2] += 0.5 - 0.5 * (a[0] + a[1]);
    a[5] += 0.5 - 0.5 * (a[3] + a[4]);
  }
  const Mat3 gt = transpose3(augment_frame(d));
  by_dtype(dtype, "cameras", value, [&](auto* v) { camera_values(a, gt, matrix, n, v); });
}

}  // namespace tarmac
