#include "transform/affine_warp.h"

#include "transform/affine_warp_internal.h"

#include <algorithm>
#include <cstring>
#include <opencv2/imgproc.hpp>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TARMAC_WARP_X86 1
#endif

namespace tarmac {
namespace {

// cv::warpAffine's arithmetic (imgwarp.cpp, OpenCV 4): the inverse map in fixed point with 10
// fractional bits, rounded to 5 (INTER_BITS) for the bilinear weights; the weights of the four
// taps are products (32 - fx or fx) * (32 - fy or fy), whose sum / 1024 is rounded once
// (OpenCV's table holds them times 32 and rounds / 32768: the same integer).
constexpr int kAbScale = 1 << 10;
constexpr int kRoundDelta = kAbScale / 32 / 2;

// OpenCV's inversion of M, operation for operation (its rounding decides the taps).
Affine invert_like_opencv(const Affine& fwd) {
  Affine m = fwd;
  double d = m[0] * m[4] - m[1] * m[3];
  d = d != 0 ? 1. / d : 0;
  const double a11 = m[4] * d, a22 = m[0] * d;
  m[0] = a11;
  m[1] *= -d;
  m[3] *= -d;
  m[4] = a22;
  const double b1 = -m[0] * m[2] - m[1] * m[5];
  const double b2 = -m[3] * m[2] - m[4] * m[5];
  m[2] = b1;
  m[5] = b2;
  return m;
}

// One output pixel from fixed-point source position (X, Y) (5 fractional bits): OpenCV's
// remapBilinear with BORDER_CONSTANT, taps outside the source taking `fill`.
inline void warp_pixel(const uint8_t* src, int sstep, int sw, int sh, int x, int y,
                       const uint8_t* fill, uint8_t* d) {
  const int sx = std::clamp(x >> 5, -32768, 32767), sy = std::clamp(y >> 5, -32768, 32767);
  if (sx >= sw || sx + 1 < 0 || sy >= sh || sy + 1 < 0) {
    d[0] = fill[0], d[1] = fill[1], d[2] = fill[2];
    return;
  }
  const int fx = x & 31, fy = y & 31;
  const int w00 = (32 - fx) * (32 - fy), w01 = fx * (32 - fy), w10 = (32 - fx) * fy, w11 = fx * fy;
  const bool x0 = sx >= 0, x1 = sx + 1 < sw, y0 = sy >= 0, y1 = sy + 1 < sh;
  const uint8_t* r0 = src + ptrdiff_t(sy) * sstep + ptrdiff_t(sx) * 3;
  const uint8_t* r1 = r0 + sstep;
  for (int c = 0; c < 3; ++c) {
    const int v0 = x0 && y0 ? r0[c] : fill[c];
    const int v1 = x1 && y0 ? r0[c + 3] : fill[c];
    const int v2 = x0 && y1 ? r1[c] : fill[c];
    const int v3 = x1 && y1 ? r1[c + 3] : fill[c];
    d[c] = uint8_t((v0 * w00 + v1 * w01 + v2 * w10 + v3 * w11 + 512) >> 10);
  }
}

// The n pixels of a group whose taps are not all inside: those in `done` (a bit per pixel) are
// already written, those outside `near` are the fill, the others OpenCV's border rule.
inline void edge_pixels(const uint8_t* src, int sstep, int sw, int sh, const int* x, const int* y,
                        int n, int done, int near, const uint8_t* fill, uint8_t* d) {
  for (int k = 0; k < n; ++k, d += 3) {
    if (done >> k & 1) continue;
    if (near >> k & 1)
      warp_pixel(src, sstep, sw, sh, x[k], y[k], fill, d);
    else
      d[0] = fill[0], d[1] = fill[1], d[2] = fill[2];
  }
}

#ifdef TARMAC_WARP_X86
// Both vector kernels: each output pixel's four taps are two 8-byte loads (R G B of columns ix
// and ix + 1 and two bytes not used, from rows iy and iy + 1) into one 128-bit lane: no
// gathers, which cost twice as much here (docs/performance.md). A lane holds
// (R, R') of the upper row, (R, R') of the lower, then G and B: maddubs against (32 - fx, fx)
// interpolates along x, madd against (32 - fy, fy) along y, giving R G B 0 as 32-bit sums.
// A group of pixels whose taps are all outside is the fill; a pixel with some tap outside (or
// in the last column, where the 8-byte load would overrun) goes through warp_pixel.
#define TARMAC_AVX2 __attribute__((target("avx2")))
#define TARMAC_AVX512 __attribute__((target("avx512f,avx512bw")))

// The per-row inverse map: source position of output pixel x of row y is (x0 + adelta[x],
// y0 + bdelta[x]) with 10 fractional bits (OpenCV's AB_BITS, INTER_BITS rounding included).
struct RowMap {
  std::vector<int> adelta, bdelta;
  RowMap(const Affine& inv, int dw) : adelta(size_t(dw)), bdelta(size_t(dw)) {
    for (int x = 0; x < dw; ++x) {
      adelta[size_t(x)] = cvRound(inv[0] * x * kAbScale);
      bdelta[size_t(x)] = cvRound(inv[3] * x * kAbScale);
    }
  }
  static int x0(const Affine& inv, int y) {
    return cvRound((inv[1] * y + inv[2]) * kAbScale) + kRoundDelta;
  }
  static int y0(const Affine& inv, int y) {
    return cvRound((inv[4] * y + inv[5]) * kAbScale) + kRoundDelta;
  }
};

// Per 32-bit lane: 0 <= v <= lim (v unsigned at most lim, for lim >= 0).
TARMAC_AVX2 inline __m256i within(__m256i v, __m256i lim) {
  return _mm256_cmpeq_epi32(_mm256_min_epu32(v, lim), v);
}

// 8 bytes of row 0 at o, then 8 of row 1.
TARMAC_AVX2 inline __m128i two_rows(const uint8_t* s0, const uint8_t* s1, size_t o) {
  const __m128i r0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s0 + o));
  return _mm_castpd_si128(
      _mm_loadh_pd(_mm_castsi128_pd(r0), reinterpret_cast<const double*>(s1 + o)));
}

// Output pixels k and k + 4 of a group of eight, one per 128-bit lane: R G B 0 as 32-bit sums.
// wx holds (32 - fx, fx) as bytes twice per pixel, wy (32 - fy, fy) as 16-bit words.
template <int k>
TARMAC_AVX2 inline __m256i blend_pair(const uint8_t* s0, const uint8_t* s1, const uint32_t* off,
                                      __m256i wx, __m256i wy) {
  const __m256i pairs = _mm256_setr_epi8(0, 3, 8, 11, 1, 4, 9, 12, 2, 5, 10, 13, -1, -1, -1, -1, 0,
                                         3, 8, 11, 1, 4, 9, 12, 2, 5, 10, 13, -1, -1, -1, -1);
  const __m256i t =
      _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(two_rows(s0, s1, off[k])),
                                                  two_rows(s0, s1, off[k + 4]), 1),
                          pairs);
  const __m256i h = _mm256_maddubs_epi16(t, _mm256_shuffle_epi32(wx, k * 0x55));
  const __m256i v = _mm256_madd_epi16(h, _mm256_shuffle_epi32(wy, k * 0x55));
  return _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(512)), 10);
}

// Eight output pixels at a time.
TARMAC_AVX2 void warp_rgb8_avx2(const cv::Mat& src, cv::Mat& dst, const Affine& inv,
                                const uint8_t* fill) {
  const int dw = dst.cols, dh = dst.rows, sw = src.cols, sh = src.rows;
  const int sstep = static_cast<int>(src.step);
  const uint8_t *s0 = src.ptr<uint8_t>(), *s1 = s0 + sstep;
  const RowMap map(inv, dw);
  // RGBx RGBx RGBx RGBx -> 12 bytes RGB, per 128-bit lane.
  const __m256i rgb = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1,
                                       2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i v31 = _mm256_set1_epi32(31), v32 = _mm256_set1_epi32(32);
  const __m256i lim_x = _mm256_set1_epi32(sw - 3), lim_y = _mm256_set1_epi32(sh - 2);
  const __m256i near_x = _mm256_set1_epi32(sw), near_y = _mm256_set1_epi32(sh);
  const __m256i one = _mm256_set1_epi32(1), stepv = _mm256_set1_epi32(sstep);
  const __m128i fill16 = _mm_set1_epi8(static_cast<char>(fill[0]));
  for (int y = 0; y < dh; ++y) {
    const int x0 = RowMap::x0(inv, y), y0 = RowMap::y0(inv, y);
    const __m256i x0v = _mm256_set1_epi32(x0), y0v = _mm256_set1_epi32(y0);
    uint8_t* d = dst.ptr<uint8_t>(y);
    int x = 0;
    for (; x + 8 <= dw; x += 8) {
      const __m256i X = _mm256_add_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&map.adelta[size_t(x)])), x0v);
      const __m256i Y = _mm256_add_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&map.bdelta[size_t(x)])), y0v);
      const __m256i ix = _mm256_srai_epi32(X, 10), iy = _mm256_srai_epi32(Y, 10);
      const __m256i inside = _mm256_and_si256(within(ix, lim_x), within(iy, lim_y));
      const int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(inside));
      const __m256i xs = _mm256_srai_epi32(X, 5), ys = _mm256_srai_epi32(Y, 5);
      int near = 0xFF;  // pixels with some tap inside: -1 <= ix <= sw - 1, the same for y
      alignas(32) int px[8], py[8];
      if (lanes != 0xFF) {
        near = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(
            within(_mm256_add_epi32(ix, one), near_x), within(_mm256_add_epi32(iy, one), near_y))));
        if (near == 0) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * x), fill16);
          _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 3 * x + 16), fill16);
          continue;
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(px), xs);
        _mm256_store_si256(reinterpret_cast<__m256i*>(py), ys);
        if (lanes == 0) {
          edge_pixels(s0, sstep, sw, sh, px, py, 8, 0, near, fill, d + 3 * x);
          continue;
        }
      }
      const __m256i fx = _mm256_and_si256(xs, v31), fy = _mm256_and_si256(ys, v31);
      __m256i wx = _mm256_or_si256(_mm256_sub_epi32(v32, fx), _mm256_slli_epi32(fx, 8));
      wx = _mm256_or_si256(wx, _mm256_slli_epi32(wx, 16));
      const __m256i wy = _mm256_or_si256(_mm256_sub_epi32(v32, fy), _mm256_slli_epi32(fy, 16));
      // Pixels not inside read pixel (0, 0), then are redone by edge_pixels.
      alignas(32) uint32_t off[8];
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(off),
          _mm256_and_si256(inside,
                           _mm256_add_epi32(_mm256_mullo_epi32(iy, stepv),
                                            _mm256_add_epi32(ix, _mm256_add_epi32(ix, ix)))));
      const __m256i p01 = _mm256_packus_epi32(blend_pair<0>(s0, s1, off, wx, wy),
                                              blend_pair<1>(s0, s1, off, wx, wy));
      const __m256i p23 = _mm256_packus_epi32(blend_pair<2>(s0, s1, off, wx, wy),
                                              blend_pair<3>(s0, s1, off, wx, wy));
      // Lanes: pixels 0-3 and 4-7, 12 bytes each.
      const __m256i out = _mm256_shuffle_epi8(_mm256_packus_epi16(p01, p23), rgb);
      // 24 bytes: the first lane's 16-byte store spills 4 bytes that the second lane rewrites.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * x), _mm256_castsi256_si128(out));
      const __m128i top = _mm256_extracti128_si256(out, 1);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 3 * x + 12), top);
      const int last = _mm_extract_epi32(top, 2);
      std::memcpy(d + 3 * x + 20, &last, 4);
      if (lanes != 0xFF) edge_pixels(s0, sstep, sw, sh, px, py, 8, lanes, near, fill, d + 3 * x);
    }
    for (; x < dw; ++x)
      warp_pixel(s0, sstep, sw, sh, (x0 + map.adelta[size_t(x)]) >> 5,
                 (y0 + map.bdelta[size_t(x)]) >> 5, fill, d + 3 * x);
  }
}

// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own _mm512_undefined_* (GCC
// bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Output pixels k, k + 4, k + 8, k + 12 of a group of sixteen, one per 128-bit lane.
template <int k>
TARMAC_AVX512 inline __m512i blend_quad(const uint8_t* s0, const uint8_t* s1, const uint32_t* off,
                                        __m512i wx, __m512i wy) {
  const __m512i pairs =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 3, 8, 11, 1, 4, 9, 12, 2, 5, 10, 13, -1, -1, -1, -1));
  const size_t a = off[k], b = off[k + 4], c = off[k + 8], e = off[k + 12];
  __m512i t = _mm512_castsi128_si512(two_rows(s0, s1, a));
  t = _mm512_inserti32x4(t, two_rows(s0, s1, b), 1);
  t = _mm512_inserti32x4(t, two_rows(s0, s1, c), 2);
  t = _mm512_inserti32x4(t, two_rows(s0, s1, e), 3);
  t = _mm512_shuffle_epi8(t, pairs);
  const __m512i h = _mm512_maddubs_epi16(t, _mm512_shuffle_epi32(wx, _MM_PERM_ENUM(k * 0x55)));
  const __m512i v = _mm512_madd_epi16(h, _mm512_shuffle_epi32(wy, _MM_PERM_ENUM(k * 0x55)));
  return _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(512)), 10);
}

// Sixteen output pixels at a time, as warp_rgb8_avx2.
TARMAC_AVX512 void warp_rgb8_avx512(const cv::Mat& src, cv::Mat& dst, const Affine& inv,
                                    const uint8_t* fill) {
  const int dw = dst.cols, dh = dst.rows, sw = src.cols, sh = src.rows;
  const int sstep = static_cast<int>(src.step);
  const uint8_t *s0 = src.ptr<uint8_t>(), *s1 = s0 + sstep;
  const RowMap map(inv, dw);
  // Per 128-bit lane RGBx RGBx RGBx RGBx -> 12 bytes RGB, then the four lanes' 48 bytes packed.
  const __m512i rgb =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
  const __m512i packed = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
  const __m512i v31 = _mm512_set1_epi32(31), v32 = _mm512_set1_epi32(32);
  const __m512i lim_x = _mm512_set1_epi32(sw - 3), lim_y = _mm512_set1_epi32(sh - 2);
  const __m512i near_x = _mm512_set1_epi32(sw), near_y = _mm512_set1_epi32(sh);
  const __m512i one = _mm512_set1_epi32(1), stepv = _mm512_set1_epi32(sstep);
  const __m512i fill64 = _mm512_set1_epi8(static_cast<char>(fill[0]));
  for (int y = 0; y < dh; ++y) {
    const int x0 = RowMap::x0(inv, y), y0 = RowMap::y0(inv, y);
    const __m512i x0v = _mm512_set1_epi32(x0), y0v = _mm512_set1_epi32(y0);
    uint8_t* d = dst.ptr<uint8_t>(y);
    int x = 0;
    for (; x + 16 <= dw; x += 16) {
      const __m512i X = _mm512_add_epi32(_mm512_loadu_si512(&map.adelta[size_t(x)]), x0v);
      const __m512i Y = _mm512_add_epi32(_mm512_loadu_si512(&map.bdelta[size_t(x)]), y0v);
      const __m512i ix = _mm512_srai_epi32(X, 10), iy = _mm512_srai_epi32(Y, 10);
      const __mmask16 inside =
          _mm512_cmple_epu32_mask(ix, lim_x) & _mm512_cmple_epu32_mask(iy, lim_y);
      const __m512i xs = _mm512_srai_epi32(X, 5), ys = _mm512_srai_epi32(Y, 5);
      int near = 0xFFFF;
      alignas(64) int px[16], py[16];
      if (inside != 0xFFFF) {
        near = _mm512_cmple_epu32_mask(_mm512_add_epi32(ix, one), near_x) &
               _mm512_cmple_epu32_mask(_mm512_add_epi32(iy, one), near_y);
        if (near == 0) {
          _mm512_mask_storeu_epi32(d + 3 * x, 0x0FFF, fill64);
          continue;
        }
        _mm512_store_si512(px, xs);
        _mm512_store_si512(py, ys);
        if (inside == 0) {
          edge_pixels(s0, sstep, sw, sh, px, py, 16, 0, near, fill, d + 3 * x);
          continue;
        }
      }
      const __m512i fx = _mm512_and_si512(xs, v31), fy = _mm512_and_si512(ys, v31);
      __m512i wx = _mm512_or_si512(_mm512_sub_epi32(v32, fx), _mm512_slli_epi32(fx, 8));
      wx = _mm512_or_si512(wx, _mm512_slli_epi32(wx, 16));
      const __m512i wy = _mm512_or_si512(_mm512_sub_epi32(v32, fy), _mm512_slli_epi32(fy, 16));
      alignas(64) uint32_t off[16];
      _mm512_store_si512(off,
                         _mm512_maskz_add_epi32(inside, _mm512_mullo_epi32(iy, stepv),
                                                _mm512_add_epi32(ix, _mm512_add_epi32(ix, ix))));
      const __m512i p01 = _mm512_packus_epi32(blend_quad<0>(s0, s1, off, wx, wy),
                                              blend_quad<1>(s0, s1, off, wx, wy));
      const __m512i p23 = _mm512_packus_epi32(blend_quad<2>(s0, s1, off, wx, wy),
                                              blend_quad<3>(s0, s1, off, wx, wy));
      const __m512i out =
          _mm512_permutexvar_epi32(packed, _mm512_shuffle_epi8(_mm512_packus_epi16(p01, p23), rgb));
      _mm512_mask_storeu_epi32(d + 3 * x, 0x0FFF, out);
      if (inside != 0xFFFF)
        edge_pixels(s0, sstep, sw, sh, px, py, 16, inside, near, fill, d + 3 * x);
    }
    for (; x < dw; ++x)
      warp_pixel(s0, sstep, sw, sh, (x0 + map.adelta[size_t(x)]) >> 5,
                 (y0 + map.bdelta[size_t(x)]) >> 5, fill, d + 3 * x);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

namespace detail {

bool warp_kernel_supported(WarpKernel k) {
  switch (k) {
    case WarpKernel::Auto:
    case WarpKernel::OpenCV:
      return true;
#ifdef TARMAC_WARP_X86
    case WarpKernel::Avx2:
      return __builtin_cpu_supports("avx2");
    case WarpKernel::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
    case WarpKernel::Avx2:
    case WarpKernel::Avx512:
      return false;
#endif
  }
  return false;
}

void warp_affine_linear(const cv::Mat& src, cv::Mat& dst, const Affine& m, cv::Size size,
                        double fill, WarpKernel kernel) {
  dst.create(size, src.type());
#ifdef TARMAC_WARP_X86
  static const WarpKernel best = warp_kernel_supported(WarpKernel::Avx512) ? WarpKernel::Avx512
                                 : warp_kernel_supported(WarpKernel::Avx2) ? WarpKernel::Avx2
                                                                           : WarpKernel::OpenCV;
  if (kernel == WarpKernel::Auto) kernel = best;
  // Offsets are 32-bit and OpenCV keeps tap coordinates in 16 bits: larger sources go to it;
  // the 8-byte tap loads need three columns.
  if (kernel != WarpKernel::OpenCV && warp_kernel_supported(kernel) && src.type() == CV_8UC3 &&
      src.cols >= 3 && src.rows >= 2 && src.cols < 32767 && src.rows < 32767 &&
      src.step * size_t(src.rows) < (size_t(1) << 31) && src.data != dst.data) {
    const uint8_t f = cv::saturate_cast<uint8_t>(fill);
    const uint8_t border[3] = {f, f, f};
    if (kernel == WarpKernel::Avx512)
      warp_rgb8_avx512(src, dst, invert_like_opencv(m), border);
    else
      warp_rgb8_avx2(src, dst, invert_like_opencv(m), border);
    return;
  }
#else
  (void)kernel;
#endif
  cv::warpAffine(src, dst, cv::Mat(2, 3, CV_64F, const_cast<double*>(m.data())), size,
                 cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(fill));
}

}  // namespace detail

void warp_affine_linear(const cv::Mat& src, cv::Mat& dst, const Affine& m, cv::Size size,
                        double fill) {
  detail::warp_affine_linear(src, dst, m, size, fill, detail::WarpKernel::Auto);
}

}  // namespace tarmac
