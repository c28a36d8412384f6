#include "transform/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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

#if defined(__x86_64__) && defined(__GNUC__)
bool have_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}
#else
bool have_avx2() {
  return false;
}
#endif

template <typename T>
void add_rows(float* r, const T* const* in, const float* w, int n, size_t len, bool first,
              float base) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_avx2()) return add_rows_avx2(r, in, w, n, len, first, base);
#endif
  add_rows_baseline(r, in, w, n, len, first, base);
}

// The horizontal taps again, `k` per output pixel (the axis's most): its own, with zero
// weights before or after them so that all k lie inside the source pixels read. A loop of
// constant trip count over them runs two output pixels per AVX2 vector. A zero weight adds
// exactly 0 to a finite sum, so the sums are those of the pixel's own taps, bit for bit; but
// 0 * NaN is NaN, so only 8-bit sources (finite by construction) take it.
struct PaddedTaps {
  int k = 0;
  std::vector<int> first;      // the first source pixel read, relative to AxisTaps::lo
  std::vector<float> weights;  // k per output pixel
  // Output pixels 2i and 2i + 1's tap j as 8 floats: the first's weight 4 times, the second's.
  std::vector<float> pairs;
};

PaddedTaps padded_taps(const AxisTaps& a) {
  PaddedTaps p;
  const int out = static_cast<int>(a.count.size());
  for (int x = 0; x < out; ++x) p.k = std::max(p.k, a.count[x]);
  p.first.resize(size_t(out));
  p.weights.assign(size_t(out) * size_t(p.k), 0.0f);
  for (int x = 0; x < out; ++x) {
    // count <= k <= hi - lo, so a start moved back to hi - k stays at or after lo.
    const int first = std::min(a.first[x], a.hi - p.k), lead = a.first[x] - first;
    p.first[size_t(x)] = first - a.lo;
    std::copy_n(a.weights.begin() + a.offset[x], a.count[x],
                p.weights.begin() + size_t(x) * p.k + lead);
  }
  p.pairs.resize(size_t(out / 2) * size_t(p.k) * 8);
  for (int x = 0; x + 1 < out; x += 2)
    for (int j = 0; j < p.k; ++j)
      for (int c = 0; c < 8; ++c)
        p.pairs[(size_t(x / 2) * p.k + j) * 8 + c] = p.weights[size_t(x + c / 4) * p.k + j];
  return p;
}

#if defined(__x86_64__) && defined(__GNUC__)
// Output pixels x and x + 1 of a row in the two 128-bit halves of one vector: the same sums,
// in the same order, as the per-pixel loop of resample(). `r` holds one float past its last
// pixel, `o` one past its last output pixel (3-channel pixels are stored 4 lanes wide).
template <int CN>
__attribute__((target("avx2"))) void shrink_row_avx2(const float* r, const PaddedTaps& t,
                                                     const float* outside, float* o, int out_w) {
  static_assert(CN == 3 || CN == 4);
  const int k = t.k;
  int x = 0;
  for (; x + 1 < out_w; x += 2, o += 2 * CN) {
    const float* p0 = r + size_t(t.first[size_t(x)]) * CN;
    const float* p1 = r + size_t(t.first[size_t(x) + 1]) * CN;
    const float* w = t.pairs.data() + size_t(x) * k * 4;
    __m256 acc = _mm256_set_m128(_mm_set1_ps(outside[x + 1]), _mm_set1_ps(outside[x]));
    for (int j = 0; j < k; ++j, p0 += CN, p1 += CN, w += 8) {
      const __m256 v =
          _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p0)), _mm_loadu_ps(p1), 1);
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(w), v));
    }
    _mm_storeu_ps(o, _mm256_castps256_ps128(acc));
    _mm_storeu_ps(o + CN, _mm256_extractf128_ps(acc, 1));
  }
  if (x < out_w) {
    const float* p = r + size_t(t.first[size_t(x)]) * CN;
    const float* w = t.weights.data() + size_t(x) * k;
    __m128 acc = _mm_set1_ps(outside[x]);
    for (int j = 0; j < k; ++j, p += CN)
      acc = _mm_add_ps(acc, _mm_mul_ps(_mm_set1_ps(w[j]), _mm_loadu_ps(p)));
    _mm_storeu_ps(o, acc);
  }
}
#endif

// Vertical pass first, over whole rows, into one float row of the source columns read; then
// the horizontal pass of that row into the output row. A shrink so reads each source row
// about once and runs the per-pixel taps on output rows only.
template <typename T, int CN>
void resample(const cv::Mat& src, const AxisTaps& ax, const AxisTaps& ay, float pad, cv::Mat& out) {
  const int out_w = out.cols, out_h = out.rows;
  const size_t len = size_t(ax.hi - ax.lo) * CN;
  std::vector<float> row(len + 4);  // + 4: a pixel's 4-lane load may read one float past
  std::vector<float> orow(size_t(out_w) * CN + 4);  // + 4: shrink_row_avx2's last store
#if defined(__x86_64__) && defined(__GNUC__)
  constexpr bool kPairs = std::is_same_v<T, uint8_t> && CN >= 3;
  PaddedTaps px;
  std::vector<float> outside_pad;  // each output pixel's share of pad
  if (kPairs && have_avx2()) {
    px = padded_taps(ax);
    outside_pad.resize(size_t(out_w));
    for (int x = 0; x < out_w; ++x) outside_pad[size_t(x)] = ax.outside[x] * pad;
  }
#endif
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
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (kPairs) {
      if (!outside_pad.empty()) {
        shrink_row_avx2<CN>(r, px, outside_pad.data(), o, out_w);
        cv::Mat(1, out_w * CN, CV_32F, o).convertTo(out.row(y).reshape(1, 1), out.depth());
        continue;
      }
    }
#endif
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
