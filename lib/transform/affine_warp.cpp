#include "transform/affine_warp.h"

#include <algorithm>
#include <cstring>
#include <opencv2/imgproc.hpp>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TARMAC_WARP_AVX2 1
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

#ifdef TARMAC_WARP_AVX2
// Eight output pixels at a time (each tap pair one 8-byte gather: R G B R G B and two bytes of
// the next pixel); a pixel whose taps are not all inside the source with a column to spare, and
// the row's tail, pixel by pixel.
__attribute__((target("avx2"))) void warp_rgb8_avx2(const cv::Mat& src, cv::Mat& dst,
                                                    const Affine& inv, const uint8_t* fill) {
  const int dw = dst.cols, dh = dst.rows, sw = src.cols, sh = src.rows;
  const int sstep = static_cast<int>(src.step);
  const uint8_t* s = src.ptr<uint8_t>();
  std::vector<int> adelta(static_cast<size_t>(dw)), bdelta(static_cast<size_t>(dw));
  for (int x = 0; x < dw; ++x) {
    adelta[size_t(x)] = cvRound(inv[0] * x * kAbScale);
    bdelta[size_t(x)] = cvRound(inv[3] * x * kAbScale);
  }
  // Per 8-byte tap pair: R0 R1 G0 G1 B0 B1 0 0, for maddubs against (32 - fx, fx) pairs.
  const __m256i pairs = _mm256_setr_epi8(0, 3, 1, 4, 2, 5, -1, -1, 8, 11, 9, 12, 10, 13, -1, -1, 0,
                                         3, 1, 4, 2, 5, -1, -1, 8, 11, 9, 12, 10, 13, -1, -1);
  // RGBx RGBx RGBx RGBx -> 12 bytes RGB, per 128-bit lane.
  const __m256i rgb = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1,
                                       2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i v31 = _mm256_set1_epi32(31), v32 = _mm256_set1_epi32(32);
  const __m256i lim_x = _mm256_set1_epi32(sw - 2), lim_y = _mm256_set1_epi32(sh - 1);
  const __m256i minus1 = _mm256_set1_epi32(-1), stepv = _mm256_set1_epi32(sstep);
  const __m256i half = _mm256_set1_epi32(512);
  // unpacklo/hi_epi16 take pixels (0, 2) and (1, 3) of a half (per 128-bit lane).
  const __m256i wsel[2][2] = {
      {_mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2), _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3)},
      {_mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6), _mm256_setr_epi32(5, 5, 5, 5, 7, 7, 7, 7)}};
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int y = 0; y < dh; ++y) {
    const int x0 = cvRound((inv[1] * y + inv[2]) * kAbScale) + kRoundDelta;
    const int y0 = cvRound((inv[4] * y + inv[5]) * kAbScale) + kRoundDelta;
    uint8_t* d = dst.ptr<uint8_t>(y);
    int x = 0;
    for (; x + 8 <= dw; x += 8) {
      const __m256i xs = _mm256_srai_epi32(
          _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(&adelta[size_t(x)])),
                           _mm256_set1_epi32(x0)),
          5);
      const __m256i ys = _mm256_srai_epi32(
          _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(&bdelta[size_t(x)])),
                           _mm256_set1_epi32(y0)),
          5);
      const __m256i ix = _mm256_srai_epi32(xs, 5), iy = _mm256_srai_epi32(ys, 5);
      const __m256i inside = _mm256_and_si256(
          _mm256_and_si256(_mm256_cmpgt_epi32(lim_x, ix), _mm256_cmpgt_epi32(ix, minus1)),
          _mm256_and_si256(_mm256_cmpgt_epi32(lim_y, iy), _mm256_cmpgt_epi32(iy, minus1)));
      const int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(inside));
      alignas(32) int px[8], py[8];
      if (lanes != 0xFF) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(px), xs);
        _mm256_store_si256(reinterpret_cast<__m256i*>(py), ys);
        if (lanes == 0) {  // the border: pixel by pixel (mostly the fill)
          for (int k = 0; k < 8; ++k)
            warp_pixel(s, sstep, sw, sh, px[k], py[k], fill, d + 3 * (x + k));
          continue;
        }
      }
      const __m256i fx = _mm256_and_si256(xs, v31), fy = _mm256_and_si256(ys, v31);
      // Lanes outside read pixel (0, 0), then are redone pixel by pixel below.
      const __m256i off = _mm256_and_si256(
          inside, _mm256_add_epi32(_mm256_mullo_epi32(iy, stepv),
                                   _mm256_add_epi32(ix, _mm256_add_epi32(ix, ix))));
      const __m256i wx16 = _mm256_or_si256(_mm256_sub_epi32(v32, fx), _mm256_slli_epi32(fx, 8));
      const __m256i wy32 = _mm256_or_si256(_mm256_sub_epi32(v32, fy), _mm256_slli_epi32(fy, 16));
      __m256i half_out[2];
      for (int h = 0; h < 2; ++h) {  // pixels 4h .. 4h + 3
        const __m128i o = h ? _mm256_extracti128_si256(off, 1) : _mm256_castsi256_si128(off);
        __m256i wx = _mm256_cvtepu32_epi64(h ? _mm256_extracti128_si256(wx16, 1)
                                             : _mm256_castsi256_si128(wx16));
        wx = _mm256_or_si256(wx,
                             _mm256_or_si256(_mm256_slli_epi64(wx, 16), _mm256_slli_epi64(wx, 32)));
        const auto* row0 = reinterpret_cast<const long long*>(s);
        const auto* row1 = reinterpret_cast<const long long*>(s + sstep);
        const __m256i a = _mm256_shuffle_epi8(_mm256_i32gather_epi64(row0, o, 1), pairs);
        const __m256i b = _mm256_shuffle_epi8(_mm256_i32gather_epi64(row1, o, 1), pairs);
        const __m256i h0 = _mm256_maddubs_epi16(a, wx), h1 = _mm256_maddubs_epi16(b, wx);
        __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(h0, h1),
                                       _mm256_permutevar8x32_epi32(wy32, wsel[h][0]));
        __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(h0, h1),
                                       _mm256_permutevar8x32_epi32(wy32, wsel[h][1]));
        lo = _mm256_srli_epi32(_mm256_add_epi32(lo, half), 10);
        hi = _mm256_srli_epi32(_mm256_add_epi32(hi, half), 10);
        half_out[h] = _mm256_packus_epi32(lo, hi);  // lanes: pixels (0, 1), (2, 3) of the half
      }
      __m256i out = _mm256_packus_epi16(half_out[0], half_out[1]);  // 0 1 4 5 | 2 3 6 7
      out = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(out, order), rgb);
      // 24 bytes: the first lane's 16-byte store spills 4 bytes that the second lane rewrites.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * x), _mm256_castsi256_si128(out));
      const __m128i top = _mm256_extracti128_si256(out, 1);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 3 * x + 12), top);
      const int last = _mm_extract_epi32(top, 2);
      std::memcpy(d + 3 * x + 20, &last, 4);
      if (lanes != 0xFF)
        for (int k = 0; k < 8; ++k)
          if (!(lanes >> k & 1)) warp_pixel(s, sstep, sw, sh, px[k], py[k], fill, d + 3 * (x + k));
    }
    for (; x < dw; ++x)
      warp_pixel(s, sstep, sw, sh, (x0 + adelta[size_t(x)]) >> 5, (y0 + bdelta[size_t(x)]) >> 5,
                 fill, d + 3 * x);
  }
}
#endif

}  // namespace

void warp_affine_linear(const cv::Mat& src, cv::Mat& dst, const Affine& m, cv::Size size,
                        double fill) {
  dst.create(size, src.type());
#ifdef TARMAC_WARP_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  // Offsets are 32-bit and OpenCV keeps tap coordinates in 16 bits: larger sources go to it.
  if (avx2 && src.type() == CV_8UC3 && src.cols >= 2 && src.rows >= 2 && src.cols < 32767 &&
      src.rows < 32767 && src.step * size_t(src.rows) < (size_t(1) << 31) && src.data != dst.data) {
    const uint8_t f = cv::saturate_cast<uint8_t>(fill);
    const uint8_t border[3] = {f, f, f};
    warp_rgb8_avx2(src, dst, invert_like_opencv(m), border);
    return;
  }
#endif
  cv::warpAffine(src, dst, cv::Mat(2, 3, CV_64F, const_cast<double*>(m.data())), size,
                 cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(fill));
}

}  // namespace tarmac
