#include "transform/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace tarmac {
namespace {

// The weights of one axis: output index x reads `count[x]` source pixels from `first[x]` on,
// with weights[offset[x] ...], and the pad value with weight outside[x].
struct AxisTaps {
  std::vector<int> first, count, offset;
  std::vector<float> weights, outside;
  int lo = 0, hi = 0;  // the source pixels read: [lo, hi); lo == hi when none
};

// Keys' cubic convolution kernel with a = -0.5 (Catmull-Rom), support [-2, 2].
double keys_cubic(double x) {
  x = std::abs(x);
  if (x < 1) return (1.5 * x - 2.5) * x * x + 1;
  if (x < 2) return ((-0.5 * x + 2.5) * x - 4) * x + 2;
  return 0;
}

AxisTaps axis_taps(double s, double t, int out, int n, ShrinkFilter filter) {
  AxisTaps a;
  a.first.resize(out);
  a.count.resize(out);
  a.offset.resize(out);
  a.outside.resize(out);
  a.lo = n;
  a.hi = 0;
  const double lim = n + 1.0;
  for (int x = 0; x < out; ++x) {
    a.offset[x] = static_cast<int>(a.weights.size());
    int first = 0, count = 0;
    double outside = 0;
    if (s < 1) {
      // The footprint [u0, u1] in source pixel-centre coordinates: pixel i spans [i - .5, i + .5].
      const double u0 = (x - 0.5 - t) / s, u1 = (x + 0.5 - t) / s;
      const double in0 = std::clamp(u0, -0.5, n - 0.5), in1 = std::clamp(u1, -0.5, n - 0.5);
      outside = ((u1 - u0) - (in1 - in0)) * s;
      if (in1 > in0 && filter == ShrinkFilter::Cubic) {
        // The kernel stretched by 1 / s about u, over the source pixels it reaches, scaled to
        // sum to the footprint's share inside the source (the rest reads the pad, as Area).
        const double u = (x - t) / s, reach = 2 / s;
        first = std::clamp(static_cast<int>(std::floor(u - reach)) + 1, 0, n - 1);
        const int last = std::clamp(static_cast<int>(std::ceil(u + reach)) - 1, 0, n - 1);
        double sum = 0;
        for (int i = first; i <= last; ++i) sum += keys_cubic((i - u) * s);
        // Positive: a footprint reaching into the source has its nearest pixels within
        // 0.5 / s + 0.5 of u, where the kernel is positive.
        const double k = (1 - outside) / sum;
        for (int i = first; i <= last; ++i)
          a.weights.push_back(static_cast<float>(keys_cubic((i - u) * s) * k));
        count = last - first + 1;
      } else if (in1 > in0) {
        first = std::clamp(static_cast<int>(std::floor(in0 + 0.5)), 0, n - 1);
        const int last = std::clamp(static_cast<int>(std::ceil(in1 + 0.5)) - 1, 0, n - 1);
        for (int i = first; i <= last; ++i) {
          const double w = (std::min(in1, i + 0.5) - std::max(in0, i - 0.5)) * s;
          a.weights.push_back(static_cast<float>(std::max(w, 0.0)));
        }
        count = last - first + 1;
      }
    } else {
      // Linear interpolation between the two pixels around u (outside pixels read the pad).
      const double u = std::clamp((x - t) / s, -2.0, lim);
      const int i = static_cast<int>(std::floor(u));
      const double f = u - i;
      const double w[2] = {1 - f, f};
      for (int k = 0; k < 2; ++k) {
        if (i + k < 0 || i + k >= n) {
          outside += w[k];
        } else {
          if (count == 0) first = i + k;
          a.weights.push_back(static_cast<float>(w[k]));
          ++count;
        }
      }
    }
    a.first[x] = first;
    a.count[x] = count;
    a.outside[x] = static_cast<float>(outside);
    if (count > 0) {
      a.lo = std::min(a.lo, first);
      a.hi = std::max(a.hi, first + count);
    }
  }
  if (a.hi <= a.lo) a.lo = a.hi = 0;
  for (int x = 0; x < out; ++x)
    if (a.count[x] == 0) a.first[x] = a.lo;  // never read; keeps first - lo in range
  return a;
}

// Four floats: one pixel of 3 or 4 channels (GCC and Clang vector extensions: SSE on x86,
// NEON on ARM, without intrinsics).
using v4f = float __attribute__((vector_size(16)));

// r[i] = (First ? base : r[i]) + the sum of w[k] * in[k][i] over the n <= 4 rows: one pass
// over r for up to four taps.
template <bool First, typename T>
__attribute__((always_inline)) inline void add_rows_impl(float* r, const T* const* in,
                                                         const float* w, int n, size_t len,
                                                         float base) {
  const T *a = in[0], *b = in[n > 1 ? 1 : 0], *c = in[n > 2 ? 2 : 0], *d = in[n > 3 ? 3 : 0];
  const float wa = w[0], wb = w[1], wc = w[2], wd = w[3];
  auto f = [](T v) { return static_cast<float>(v); };
  switch (n) {
    case 1:
      for (size_t i = 0; i < len; ++i) r[i] = (First ? base : r[i]) + wa * f(a[i]);
      break;
    case 2:
      for (size_t i = 0; i < len; ++i) r[i] = (First ? base : r[i]) + (wa * f(a[i]) + wb * f(b[i]));
      break;
    case 3:
      for (size_t i = 0; i < len; ++i)
        r[i] = (First ? base : r[i]) + (wa * f(a[i]) + wb * f(b[i]) + wc * f(c[i]));
      break;
    default:
      for (size_t i = 0; i < len; ++i)
        r[i] = (First ? base : r[i]) + (wa * f(a[i]) + wb * f(b[i]) + wc * f(c[i]) + wd * f(d[i]));
  }
}

// The vertical pass's loop, the resampler's hottest, also built for AVX2 (8 lanes), chosen at
// run time where the CPU has it; x86-64 only, elsewhere the baseline build. Chosen by a test on
// first use, not by target_clones: an ifunc resolver runs while the program is relocated,
// before a sanitizer's runtime starts, and ThreadSanitizer builds then crash at load.
template <typename T>
void add_rows_baseline(float* r, const T* const* in, const float* w, int n, size_t len, bool first,
                       float base) {
  if (first)
    add_rows_impl<true>(r, in, w, n, len, base);
  else
    add_rows_impl<false>(r, in, w, n, len, base);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
__attribute__((target("avx2"))) void add_rows_avx2(float* r, const T* const* in, const float* w,
                                                   int n, size_t len, bool first, float base) {
  if (first)
    add_rows_impl<true>(r, in, w, n, len, base);
  else
    add_rows_impl<false>(r, in, w, n, len, base);
}
#endif

template <typename T>
void add_rows(float* r, const T* const* in, const float* w, int n, size_t len, bool first,
              float base) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return add_rows_avx2(r, in, w, n, len, first, base);
#endif
  add_rows_baseline(r, in, w, n, len, first, base);
}

// Vertical pass first, over whole rows, into one float row of the source columns read; then
// the horizontal pass of that row into the output row. A shrink so reads each source row
// about once and runs the per-pixel taps on output rows only.
template <typename T, int CN>
void resample(const cv::Mat& src, const AxisTaps& ax, const AxisTaps& ay, float pad, cv::Mat& out) {
  const int out_w = out.cols, out_h = out.rows;
  const size_t len = size_t(ax.hi - ax.lo) * CN;
  std::vector<float> row(len + 4);  // + 4: a pixel's 4-lane load may read one float past
  std::vector<float> orow(size_t(out_w) * CN);
  for (int y = 0; y < out_h; ++y) {
    float* r = row.data();
    const float base = ay.outside[y] * pad;
    if (ay.count[y] == 0) std::fill(r, r + len, base);
    const float* wy = ay.weights.data() + ay.offset[y];
    for (int k = 0; k < ay.count[y]; k += 4) {
      const int n = std::min(4, ay.count[y] - k);
      const T* in[4];
      float w[4] = {};
      for (int j = 0; j < n; ++j) {
        in[j] = src.ptr<T>(ay.first[y] + k + j) + size_t(ax.lo) * CN;
        w[j] = wy[k + j];
      }
      add_rows(r, in, w, n, len, k == 0, base);
    }
    float* o = orow.data();
    for (int x = 0; x < out_w; ++x, o += CN) {
      const float* wx = ax.weights.data() + ax.offset[x];
      const float* p = r + size_t(ax.first[x] - ax.lo) * CN;
      const float outside = ax.outside[x] * pad;
      if constexpr (CN >= 3) {
        v4f acc = {outside, outside, outside, outside};
        for (int k = 0; k < ax.count[x]; ++k, p += CN) {
          v4f v;
          std::memcpy(&v, p, sizeof v);
          acc += wx[k] * v;
        }
        for (int c = 0; c < CN; ++c) o[c] = acc[c];
      } else {
        float acc[CN];
        for (int c = 0; c < CN; ++c) acc[c] = outside;
        for (int k = 0; k < ax.count[x]; ++k, p += CN)
          for (int c = 0; c < CN; ++c) acc[c] += wx[k] * p[c];
        for (int c = 0; c < CN; ++c) o[c] = acc[c];
      }
    }
    // Rounded to nearest and saturated for 8-bit, by OpenCV's vectorised conversion.
    cv::Mat(1, out_w * CN, CV_32F, orow.data()).convertTo(out.row(y).reshape(1, 1), out.depth());
  }
}

template <typename T>
void dispatch(const cv::Mat& src, const AxisTaps& ax, const AxisTaps& ay, float pad, cv::Mat& out) {
  switch (src.channels()) {
    case 1:
      return resample<T, 1>(src, ax, ay, pad, out);
    case 2:
      return resample<T, 2>(src, ax, ay, pad, out);
    case 3:
      return resample<T, 3>(src, ax, ay, pad, out);
    case 4:
      return resample<T, 4>(src, ax, ay, pad, out);
  }
}

}  // namespace

bool axis_aligned(const Affine& m) {
  return m[1] == 0 && m[3] == 0 && m[0] > 0 && m[4] > 0 && std::isfinite(m[0]) &&
         std::isfinite(m[4]) && std::isfinite(m[2]) && std::isfinite(m[5]);
}

cv::Mat area_resample(const cv::Mat& src, const Affine& m, int out_w, int out_h, double pad,
                      ShrinkFilter filter) {
  if (!axis_aligned(m)) throw std::invalid_argument("area_resample: not an axis-aligned scale");
  if ((src.depth() != CV_8U && src.depth() != CV_32F) || src.channels() > 4)
    throw std::invalid_argument("area_resample: 8-bit or float pixels of 1 to 4 channels only");
  if (src.empty()) return cv::Mat(out_h, out_w, src.type(), cv::Scalar::all(pad));
  const AxisTaps ax = axis_taps(m[0], m[2], out_w, src.cols, filter);
  const AxisTaps ay = axis_taps(m[4], m[5], out_h, src.rows, filter);
  cv::Mat out(out_h, out_w, src.type());
  if (src.depth() == CV_8U)
    dispatch<uint8_t>(src, ax, ay, static_cast<float>(pad), out);
  else
    dispatch<float>(src, ax, ay, static_cast<float>(pad), out);
  return out;
}

}  // namespace tarmac
