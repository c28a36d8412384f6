#include "transform/resample.h"
#include "common/error.h"

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

// The area filter of an 8-bit source in fixed point: weights with 14 fractional bits, summing
// to exactly 1 with the pad's share; the vertical pass into 16-bit values with 7, the
// horizontal pass rounded to 8 bits, ties to even. n rounded weights whose errors sum to 0
// move a sum of 8-bit values by at most 127.5 * (n - 1/2) / 2^14, so with n <= kFixedTaps a
// result is within 2 * 0.058 + 2^-8 < 1/7 of a level of the float path's (1/16 for the 3 or 4
// taps of a shrink by 1/3 to 1/2): rounded differently only that close to a half. Integer sums
// do not depend on their order, so the AVX2 build and the portable one give the same bytes. A
// 16-bit multiply-add takes two taps per instruction: half the float path's instructions.
constexpr int kWeightBits = 14, kRowBits = 7, kFixedTaps = 8, kOutBits = kWeightBits + kRowBits;

// v / 2^kOutBits (v >= 0) rounded to nearest, ties to even, as the float path's cvRound: a
// shrink by 2 averages four pixels, and a quarter of its sums are ties.
inline int round_even(int v) {
  return (v + (1 << (kOutBits - 1)) - 1 + ((v >> kOutBits) & 1)) >> kOutBits;
}

struct FixedTaps {
  int k = 0;                 // taps per output index: the axis's most, rounded up to even
  std::vector<int> first;    // relative to AxisTaps::lo
  std::vector<int16_t> w;    // k per output index, zeros after its own
  std::vector<int> outside;  // the pad's share
};

FixedTaps fixed_taps(const AxisTaps& a) {
  FixedTaps f;
  const int out = static_cast<int>(a.count.size());
  for (int x = 0; x < out; ++x) f.k = std::max(f.k, a.count[x]);
  f.k += f.k % 2;
  f.first.resize(size_t(out));
  f.w.assign(size_t(out) * size_t(f.k), 0);
  f.outside.resize(size_t(out));
  constexpr float one = 1 << kWeightBits;
  for (int x = 0; x < out; ++x) {
    f.first[size_t(x)] = a.first[x] - a.lo;
    // Each weight rounded, the largest taking what makes them and the pad's share sum to
    // exactly 1: a flat area keeps its value, with no bias up or down.
    int16_t* w = f.w.data() + size_t(x) * f.k;
    int sum = 0, largest = 0;
    for (int j = 0; j < a.count[x]; ++j) {
      w[j] = static_cast<int16_t>(std::lround(a.weights[a.offset[x] + j] * one));
      sum += w[j];
      if (w[j] > w[largest]) largest = j;
    }
    f.outside[size_t(x)] = static_cast<int>(std::lround(a.outside[x] * one));
    if (a.count[x] > 0)
      w[largest] =
          static_cast<int16_t>(w[largest] + (1 << kWeightBits) - f.outside[size_t(x)] - sum);
  }
  return f;
}

// r[i] = (base + the sum of w[j] * in[j][i] over n rows, rounded) >> kRowBits.
void add_rows_fixed_baseline(int16_t* r, const uint8_t* const* in, const int16_t* w, int n,
                             size_t from, size_t len, int base) {
  for (size_t i = from; i < len; ++i) {
    int acc = base + (1 << (kRowBits - 1));
    for (int j = 0; j < n; ++j) acc += w[j] * in[j][i];
    r[i] = static_cast<int16_t>(acc >> kRowBits);
  }
}

// out[x] = the rounded sum over x's taps of row r (CN channels), + the pad's share.
template <int CN>
void shrink_row_fixed_baseline(const int16_t* r, const FixedTaps& t, const int* start, uint8_t* o,
                               int from, int out_w) {
  for (int x = from; x < out_w; ++x) {
    const int16_t* p = r + size_t(t.first[size_t(x)]) * CN;
    const int16_t* w = t.w.data() + size_t(x) * t.k;
    for (int c = 0; c < CN; ++c) {
      int acc = start[x];
      for (int j = 0; j < t.k; ++j) acc += w[j] * p[j * CN + c];
      o[x * CN + c] = static_cast<uint8_t>(std::clamp(round_even(acc), 0, 255));
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// Rows 2j and 2j + 1 interleaved as 16-bit pairs, against (w[2j], w[2j + 1]), for NP pairs
// (an odd count's last row is paired with a zero weight).
template <int NP>
__attribute__((target("avx2"))) void add_rows_fixed_avx2(int16_t* r, const uint8_t* const* in,
                                                         const int16_t* w, size_t len, int base) {
  __m256i wp[NP > 0 ? NP : 1];
  for (int j = 0; j < NP; ++j)
    wp[j] = _mm256_set1_epi32(int(uint16_t(w[2 * j])) | int(w[2 * j + 1]) << 16);
  const __m256i start = _mm256_set1_epi32(base + (1 << (kRowBits - 1)));
  size_t i = 0;
  for (; i + 16 <= len; i += 16) {
    __m256i lo = start, hi = start;
    for (int j = 0; j < NP; ++j) {
      const __m256i a =
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in[2 * j] + i)));
      const __m256i b = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[2 * j + 1] + i)));
      lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wp[j]));
      hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wp[j]));
    }
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(r + i),
        _mm256_packs_epi32(_mm256_srai_epi32(lo, kRowBits), _mm256_srai_epi32(hi, kRowBits)));
  }
  add_rows_fixed_baseline(r, in, w, 2 * NP, i, len, base);
}

// Two output pixels per vector, one per 128-bit half: taps j and j + 1 of each channel
// side by side (a byte shuffle of 8 loaded 16-bit values), one multiply-add per tap pair; K
// taps per pixel. `start` is each pixel's pad share, `r` holds at least 8
// zero values past the taps' reach, `o` 4 bytes past the last pixel.
template <int CN, int K>
__attribute__((target("avx2"))) void shrink_row_fixed_avx2(const int16_t* r, const FixedTaps& t,
                                                           const int16_t* pairs, const int* start,
                                                           uint8_t* o, int out_w) {
  static_assert(CN == 3 || CN == 4);
  const __m256i shuffle =
      CN == 3 ? _mm256_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15, 0, 1, 6, 7,
                                 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15)
              : _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8, 9,
                                 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  const int* first = t.first.data();
  for (int x = 0; x + 1 < out_w; x += 2) {
    const int16_t* p0 = r + size_t(first[x]) * CN;
    const int16_t* p1 = r + size_t(first[x + 1]) * CN;
    const int16_t* w = pairs + size_t(x / 2) * K * 8;
    __m256i acc = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi32(start[x])),
                                          _mm_set1_epi32(start[x + 1]), 1);
    for (int j = 0; j < K; j += 2) {
      const __m256i v = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + j * CN))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + j * CN)), 1);
      acc = _mm256_add_epi32(
          acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, shuffle),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j * 8))));
    }
    // round_even's rounding: half - 1, and 1 more where the integer part is odd.
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(acc, kOutBits), _mm256_set1_epi32(1));
    acc =
        _mm256_add_epi32(acc, _mm256_add_epi32(odd, _mm256_set1_epi32((1 << (kOutBits - 1)) - 1)));
    acc = _mm256_srai_epi32(acc, kOutBits);
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(acc, acc), acc);
    const uint32_t a = uint32_t(_mm256_extract_epi32(bytes, 0));
    const uint32_t b = uint32_t(_mm256_extract_epi32(bytes, 4));
    std::memcpy(o + x * CN, &a, 4);  // for 3 channels the 4th byte is the next pixel's, rewritten
    std::memcpy(o + (x + 1) * CN, &b, 4);
  }
}
#endif

// The fixed-point resampler of an 8-bit source of 3 or 4 channels, the area filter (or an
// enlarging axis's linear one: weights >= 0 too) and a pad of 0 to 255.
template <int CN>
void resample_fixed(const cv::Mat& src, const AxisTaps& ax, const AxisTaps& ay, int pad,
                    cv::Mat& out) {
  const int out_w = out.cols, out_h = out.rows;
  const size_t len = size_t(ax.hi - ax.lo) * CN;
  const FixedTaps fx = fixed_taps(ax), fy = fixed_taps(ay);
  // Past `len`: zeros for the padded taps of the last pixels and the 8-value loads.
  std::vector<int16_t> row(len + size_t(fx.k + 8) * CN, 0);
  std::vector<uint8_t> orow(size_t(out_w) * CN + 4);
  const bool avx2 = have_avx2();
  std::vector<int> start(static_cast<size_t>(out_w));  // each output pixel's pad share
  for (int x = 0; x < out_w; ++x) start[size_t(x)] = fx.outside[size_t(x)] * pad << kRowBits;
  // (x, x + 1)'s weights for tap pair j: (w[x][j], w[x][j + 1]) 4 times, then x + 1's.
  std::vector<int16_t> pairs;
  if (avx2) {
    pairs.assign(size_t(out_w / 2) * size_t(fx.k) * 8, 0);
    for (int x = 0; x + 1 < out_w; x += 2)
      for (int j = 0; j < fx.k; j += 2)
        for (int h = 0; h < 2; ++h)
          for (int c = 0; c < CN; ++c) {
            int16_t* d = pairs.data() + (size_t(x / 2) * fx.k + j) * 8 + h * 8 + c * 2;
            const int16_t* w = fx.w.data() + size_t(x + h) * fx.k + j;
            d[0] = w[0];
            d[1] = w[1];
          }
  }
  const uint8_t* in[kFixedTaps + 1];
  for (int y = 0; y < out_h; ++y) {
    const int n = ay.count[y], base = fy.outside[size_t(y)] * pad;
    for (int j = 0; j < n; ++j) in[j] = src.ptr<uint8_t>(ay.first[y] + j) + size_t(ax.lo) * CN;
    if (n % 2) in[n] = in[n - 1];  // read with weight 0 (fy.k is even)
    const int16_t* wy = fy.w.data() + size_t(y) * fy.k;
    uint8_t* o = orow.data();
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2) {
      switch ((n + 1) / 2) {
        case 0:
          add_rows_fixed_avx2<0>(row.data(), in, wy, len, base);
          break;
        case 1:
          add_rows_fixed_avx2<1>(row.data(), in, wy, len, base);
          break;
        case 2:
          add_rows_fixed_avx2<2>(row.data(), in, wy, len, base);
          break;
        case 3:
          add_rows_fixed_avx2<3>(row.data(), in, wy, len, base);
          break;
        default:
          add_rows_fixed_avx2<4>(row.data(), in, wy, len, base);
      }
      switch (fx.k) {
        case 0:  // every tap outside the source: the pad
          shrink_row_fixed_avx2<CN, 0>(row.data(), fx, pairs.data(), start.data(), o, out_w);
          break;
        case 2:
          shrink_row_fixed_avx2<CN, 2>(row.data(), fx, pairs.data(), start.data(), o, out_w);
          break;
        case 4:
          shrink_row_fixed_avx2<CN, 4>(row.data(), fx, pairs.data(), start.data(), o, out_w);
          break;
        case 6:
          shrink_row_fixed_avx2<CN, 6>(row.data(), fx, pairs.data(), start.data(), o, out_w);
          break;
        default:
          shrink_row_fixed_avx2<CN, 8>(row.data(), fx, pairs.data(), start.data(), o, out_w);
      }
      if (out_w % 2)
        shrink_row_fixed_baseline<CN>(row.data(), fx, start.data(), o, out_w - 1, out_w);
    } else
#endif
    {
      add_rows_fixed_baseline(row.data(), in, wy, n, 0, len, base);
      shrink_row_fixed_baseline<CN>(row.data(), fx, start.data(), o, 0, out_w);
    }
    std::memcpy(out.ptr<uint8_t>(y), o, size_t(out_w) * CN);
  }
}

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
  if (!axis_aligned(m)) throw InternalError("area_resample: not an axis-aligned scale");
  if ((src.depth() != CV_8U && src.depth() != CV_32F) || src.channels() > 4)
    throw InternalError("area_resample: 8-bit or float pixels of 1 to 4 channels only");
  if (src.empty()) return cv::Mat(out_h, out_w, src.type(), cv::Scalar::all(pad));
  const AxisTaps ax = axis_taps(m[0], m[2], out_w, src.cols, filter);
  const AxisTaps ay = axis_taps(m[4], m[5], out_h, src.rows, filter);
  cv::Mat out(out_h, out_w, src.type());
  auto most = [](const AxisTaps& a) { return *std::max_element(a.count.begin(), a.count.end()); };
  if (src.depth() == CV_8U && src.channels() >= 3 && filter == ShrinkFilter::Area && pad >= 0 &&
      pad <= 255 && pad == std::round(pad) && out_w > 0 && out_h > 0 && most(ax) <= kFixedTaps &&
      most(ay) <= kFixedTaps) {
    if (src.channels() == 3)
      resample_fixed<3>(src, ax, ay, static_cast<int>(pad), out);
    else
      resample_fixed<4>(src, ax, ay, static_cast<int>(pad), out);
  } else if (src.depth() == CV_8U)
    dispatch<uint8_t>(src, ax, ay, static_cast<float>(pad), out);
  else
    dispatch<float>(src, ax, ay, static_cast<float>(pad), out);
  return out;
}

}  // namespace tarmac
