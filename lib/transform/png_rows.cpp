// The rows of the PNG region decoder: each row unfiltered in place (with AVX2 for the Sub and
// Paeth filters where the CPU has it) and its region's columns converted to the layout that
// cv::imdecode gives through libpng, pixel for pixel.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "transform/png_region_internal.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TARMAC_PNG_X86 1
#endif

namespace tarmac::png_detail {
namespace {

#ifdef TARMAC_PNG_X86
#define TARMAC_AVX2 __attribute__((target("avx2")))
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// The Sub filter 16 bytes at a time: the P = 16 / B whole pixels of a load are summed in the
// register (log2 P shift-and-add steps), then the pixel before them, kept replicated in
// `carry`, is added. Only that one add depends on the previous step, so the loop runs at the
// shifts' throughput rather than at a byte's store-to-load latency (the bytewise loop, which
// libpng's encoder makes the common case for OpenCV's frames, was 13 % of a 1280x720 frame's
// decode). Compiled for AVX2 so that these 128-bit operations get the VEX encoding: in their
// legacy SSE encoding, run after ISA-L's inflate (which uses the wide registers), a 1280x720
// frame took 6.5 ms instead of the bytewise loop's 5.1. Returns the first byte not done.
template <size_t B>
TARMAC_AVX2 size_t unfilter_sub_avx2(uint8_t* row, size_t n) {
  constexpr int kPixels = 16 / B, kBytes = kPixels * static_cast<int>(B);
  if (n < 16) return 0;
  alignas(16) uint8_t mask_bytes[16] = {}, last_bytes[16];
  for (int i = 0; i < 16; ++i) {
    mask_bytes[i] = i < kBytes ? 0xFF : 0;
    last_bytes[i] = static_cast<uint8_t>(i < kBytes ? kBytes - static_cast<int>(B) + i % B : 0x80);
  }
  const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(mask_bytes));
  // Shuffles the last whole pixel into every pixel.
  const __m128i last_pixel = _mm_load_si128(reinterpret_cast<const __m128i*>(last_bytes));
  __m128i carry = _mm_setzero_si128();  // the last pixel done, in every pixel of the kBytes
  // Each load comes before the store that overlaps it (by 16 - kBytes bytes), so that it is
  // not held up waiting on that store.
  __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row));
  size_t k = 0;
  for (bool more = true; more; k += kBytes) {
    more = k + kBytes + 16 <= n;
    const __m128i next =
        more ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + kBytes)) : x;
    __m128i sum = _mm_and_si128(x, mask);
    sum = _mm_add_epi8(sum, _mm_slli_si128(sum, B));
    if constexpr (kPixels > 2) sum = _mm_add_epi8(sum, _mm_slli_si128(sum, 2 * B));
    if constexpr (kPixels > 4) sum = _mm_add_epi8(sum, _mm_slli_si128(sum, 4 * B));
    if constexpr (kPixels > 8) sum = _mm_add_epi8(sum, _mm_slli_si128(sum, 8 * B));
    const __m128i done = _mm_add_epi8(sum, carry);
    // Bytes past the whole pixels stay as they were, for the next step's load.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row + k), _mm_blendv_epi8(x, done, mask));
    carry = _mm_add_epi8(carry, _mm_shuffle_epi8(sum, last_pixel));
    x = next;
  }
  return k;
}

// RGB to BGR, 5 pixels a step by a byte shuffle. Returns the pixels done: those whose step's
// 16-byte load and store stay within `pixels` (the rest are the caller's).
TARMAC_AVX2 size_t rgb_to_bgr_avx2(const uint8_t* s, uint8_t* out, size_t pixels) {
  const __m128i order = _mm_setr_epi8(2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9, 14, 13, 12, 15);
  size_t x = 0;
  for (; 3 * x + 16 <= 3 * pixels; x += 5) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * x));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * x), _mm_shuffle_epi8(v, order));
  }
  return x;
}

// B bytes (B <= 8) from p, zero-extended to 16-bit lanes.
template <size_t B>
TARMAC_AVX2 __m128i load_pixel_epi16(const uint8_t* p) {
  uint64_t v = 0;  // assembled in a register: a copy through memory stalled every pixel
  for (size_t i = 0; i < B; ++i) v |= uint64_t{p[i]} << (8 * i);
  return _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(v)));
}

// The Paeth filter a pixel at a time, its B bytes in 16-bit lanes: the choice between left,
// above and upper left is made for every byte at once, with no branch (on noisy rows the
// choice is a coin toss). B is 3 to 8.
template <size_t B>
TARMAC_AVX2 void unfilter_paeth_avx2(uint8_t* row, const uint8_t* prev, size_t n) {
  const __m128i low = _mm_set1_epi16(0xFF);
  __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128();
  for (size_t k = 0; k + B <= n; k += B) {
    const __m128i b = load_pixel_epi16<B>(prev + k);
    const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
    const __m128i pa = _mm_abs_epi16(bc), pb = _mm_abs_epi16(ac),
                  pc = _mm_abs_epi16(_mm_add_epi16(ac, bc));
    const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
    const __m128i b_or_c = _mm_blendv_epi8(b, c, _mm_cmpgt_epi16(pb, pc));
    const __m128i pred = _mm_blendv_epi8(a, b_or_c, not_a);
    a = _mm_and_si128(_mm_add_epi16(load_pixel_epi16<B>(row + k), pred), low);
    const uint64_t out = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(a, a)));
    std::memcpy(row + k, &out, B);
    c = b;
  }
}

#endif

// The row of a filter type, unfiltered in place against `prev` (the row above, unfiltered);
// B bytes per pixel, a constant so that the compiler keeps a pixel's bytes in registers.
template <size_t B>
void unfilter_bpp(uint8_t* row, const uint8_t* prev, size_t n, int type) {
  switch (type) {
    case 1: {
      size_t k = B;
#ifdef TARMAC_PNG_X86
      if (has_avx2()) k = std::max(k, unfilter_sub_avx2<B>(row, n));
#endif
      for (; k < n; ++k) row[k] = static_cast<uint8_t>(row[k] + row[k - B]);
      return;
    }
    case 2:
      for (size_t k = 0; k < n; ++k) row[k] = static_cast<uint8_t>(row[k] + prev[k]);
      return;
    case 3:
      for (size_t k = 0; k < B && k < n; ++k)
        row[k] = static_cast<uint8_t>(row[k] + (prev[k] >> 1));
      for (size_t k = B; k < n; ++k)
        row[k] = static_cast<uint8_t>(row[k] + ((row[k - B] + prev[k]) >> 1));
      return;
    case 4: {
#ifdef TARMAC_PNG_X86
      if constexpr (B >= 3) {
        if (has_avx2()) return unfilter_paeth_avx2<B>(row, prev, n);
      }
#endif
      for (size_t k = 0; k < B && k < n; ++k) row[k] = static_cast<uint8_t>(row[k] + prev[k]);
      if (n <= B) return;
      int a[B], c[B];
      for (size_t j = 0; j < B; ++j) a[j] = row[j], c[j] = prev[j];
      for (size_t k = B; k + B <= n; k += B) {
        for (size_t j = 0; j < B; ++j) {
          const int b = prev[k + j];
          const int pa = std::abs(b - c[j]), pb = std::abs(a[j] - c[j]),
                    pc = std::abs(a[j] + b - 2 * c[j]);
          // Selects without branches: on noisy rows the predictor is a coin toss. A PIL-written
          // 1280x720 frame (Paeth on 705 of 720 rows) took 18 ms branchy, 14 ms so.
          const int bc = pb <= pc ? b : c[j];
          const int pred = pa <= std::min(pb, pc) ? a[j] : bc;
          a[j] = static_cast<uint8_t>(row[k + j] + pred);
          row[k + j] = static_cast<uint8_t>(a[j]);
          c[j] = b;
        }
      }
      return;
    }
    default:
      return;
  }
}

// Sample x of a row of 1-, 2-, 4- or 8-bit samples (most significant bits first).
inline unsigned small_sample(const uint8_t* row, uint32_t x, int depth) {
  if (depth == 8) return row[x];
  const uint32_t bit = x * static_cast<uint32_t>(depth);
  const unsigned shift = 8 - static_cast<unsigned>(depth) - (bit & 7);
  return (row[bit >> 3] >> shift) & ((1u << depth) - 1);
}

// Columns [x0, x1) of an unfiltered 16-bit row into `o`, kept 16-bit (png_set_swap): native
// endian, BGR(A) order, tRNS as alpha.
void convert_row_16(const Png& p, const uint8_t* s, uint16_t* o, uint32_t x0, uint32_t x1) {
  auto at = [s](size_t k) { return be16(s + 2 * k); };
  switch (p.colour) {
    case kGrey:
      for (uint32_t x = x0; x < x1; ++x) o[x] = at(x);
      return;
    case kRgb:
      if (p.has_trns) {
        for (uint32_t x = x0; x < x1; ++x) {
          const uint16_t r = at(3 * size_t{x}), g = at(3 * size_t{x} + 1),
                         b = at(3 * size_t{x} + 2);
          uint16_t* q = o + 4 * size_t{x};
          q[0] = b, q[1] = g, q[2] = r;
          q[3] = (r == p.key[0] && g == p.key[1] && b == p.key[2]) ? 0 : 0xFFFF;
        }
      } else {
        for (uint32_t x = x0; x < x1; ++x) {
          uint16_t* q = o + 3 * size_t{x};
          q[0] = at(3 * size_t{x} + 2), q[1] = at(3 * size_t{x} + 1), q[2] = at(3 * size_t{x});
        }
      }
      return;
    case kGreyAlpha:
      for (uint32_t x = x0; x < x1; ++x) {
        uint16_t* q = o + 4 * size_t{x};
        q[0] = q[1] = q[2] = at(2 * size_t{x});
        q[3] = at(2 * size_t{x} + 1);
      }
      return;
    default:  // RGBA
      for (uint32_t x = x0; x < x1; ++x) {
        uint16_t* q = o + 4 * size_t{x};
        const size_t k = 4 * size_t{x};
        q[0] = at(k + 2), q[1] = at(k + 1), q[2] = at(k), q[3] = at(k + 3);
      }
      return;
  }
}

// Columns [x0, x1) of an unfiltered row into 8-bit `out`: BGR for `bgr` (the image), else the
// channels of allocate(); a 16-bit sample gives its high byte (png_set_strip_16).
void convert_row_8(const Png& p, bool bgr, const uint8_t* s, uint8_t* out, uint32_t x0,
                   uint32_t x1) {
  const bool wide = p.depth == 16;
  const size_t step = wide ? 2 : 1;
  switch (p.colour) {
    case kGrey: {
      const unsigned scale = p.depth == 1 ? 255 : p.depth == 2 ? 85 : p.depth == 4 ? 17 : 1;
      for (uint32_t x = x0; x < x1; ++x) {
        const auto v =
            static_cast<uint8_t>(wide ? s[2 * size_t{x}] : small_sample(s, x, p.depth) * scale);
        if (bgr)
          out[3 * size_t{x}] = out[3 * size_t{x} + 1] = out[3 * size_t{x} + 2] = v;
        else
          out[x] = v;
      }
      return;
    }
    case kPalette: {
      const int ch = bgr || !p.has_trns ? 3 : 4;
      for (uint32_t x = x0; x < x1; ++x) {
        const unsigned idx = small_sample(s, x, p.depth);
        uint8_t* q = out + static_cast<size_t>(ch) * x;
        q[0] = p.palette[idx][2], q[1] = p.palette[idx][1], q[2] = p.palette[idx][0];
        if (ch == 4) q[3] = p.alpha[idx];
      }
      return;
    }
    case kRgb: {
      const bool alpha = !bgr && p.has_trns;
      const int ch = alpha ? 4 : 3;
#ifdef TARMAC_PNG_X86
      if (!alpha && !wide && has_avx2())
        x0 += static_cast<uint32_t>(
            rgb_to_bgr_avx2(s + 3 * size_t{x0}, out + 3 * size_t{x0}, x1 - x0));
#endif
      for (uint32_t x = x0; x < x1; ++x) {
        const uint8_t* t = s + 3 * step * x;
        const uint8_t r = t[0], g = t[step], b = t[2 * step];
        uint8_t* q = out + static_cast<size_t>(ch) * x;
        q[0] = b, q[1] = g, q[2] = r;
        if (alpha)
          q[3] = (r == (p.key[0] & 0xFF) && g == (p.key[1] & 0xFF) && b == (p.key[2] & 0xFF)) ? 0
                                                                                              : 255;
      }
      return;
    }
    case kGreyAlpha:
      for (uint32_t x = x0; x < x1; ++x) {
        const uint8_t* t = s + 2 * step * x;
        if (bgr) {
          out[3 * size_t{x}] = out[3 * size_t{x} + 1] = out[3 * size_t{x} + 2] = t[0];
        } else {
          uint8_t* q = out + 4 * size_t{x};
          q[0] = q[1] = q[2] = t[0];
          q[3] = t[step];
        }
      }
      return;
    default: {  // RGBA
      const int ch = bgr ? 3 : 4;
      for (uint32_t x = x0; x < x1; ++x) {
        const uint8_t* t = s + 4 * step * x;
        uint8_t* q = out + static_cast<size_t>(ch) * x;
        q[0] = t[2 * step], q[1] = t[step], q[2] = t[0];
        if (ch == 4) q[3] = t[3 * step];
      }
      return;
    }
  }
}

}  // namespace

void unfilter(uint8_t* row, const uint8_t* prev, size_t n, size_t bpp, int type) {
  switch (bpp) {  // the bytes per pixel of every PNG colour type and depth
    case 1:
      return unfilter_bpp<1>(row, prev, n, type);
    case 2:
      return unfilter_bpp<2>(row, prev, n, type);
    case 3:
      return unfilter_bpp<3>(row, prev, n, type);
    case 4:
      return unfilter_bpp<4>(row, prev, n, type);
    case 6:
      return unfilter_bpp<6>(row, prev, n, type);
    default:
      return unfilter_bpp<8>(row, prev, n, type);
  }
}

void convert_row(const Png& p, PngLayout layout, const uint8_t* s, uint8_t* out, uint32_t x0,
                 uint32_t x1) {
  const bool bgr = layout == PngLayout::Bgr8;
  if (p.depth == 16 && !bgr)  // 16-bit kept: native-endian uint16_t
    convert_row_16(p, s, reinterpret_cast<uint16_t*>(out), x0, x1);
  else
    convert_row_8(p, bgr, s, out, x0, x1);
}

}  // namespace tarmac::png_detail
