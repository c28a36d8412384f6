#include "transform/png_region.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "common/inflate_error.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TARMAC_PNG_X86 1
#endif

namespace tarmac {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint16_t be16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

enum ColourType : uint8_t { kGrey = 0, kRgb = 2, kPalette = 3, kGreyAlpha = 4, kRgba = 6 };

struct Png {
  uint32_t width = 0, height = 0;
  int depth = 0;   // bits per sample
  int colour = 0;  // IHDR colour type
  int samples = 0;
  std::array<std::array<uint8_t, 3>, 256> palette{};  // RGB; entries past PLTE's stay black
  std::array<uint8_t, 256> alpha{};                   // palette alpha; 255 past tRNS's
  bool has_palette = false;
  uint32_t palette_size = 0;
  bool has_trns = false;
  uint16_t key[3] = {0, 0, 0};  // tRNS colour key of a grey (key[0]) or RGB image
  std::vector<std::span<const uint8_t>> idat;
  uint64_t idat_bytes = 0;
};

[[noreturn]] void corrupt(const std::string& why) {
  throw ParseError("corrupt PNG: " + why);
}

bool valid_depth(int colour, int depth) {
  switch (colour) {
    case kGrey:
      return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case kPalette:
      return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case kRgb:
    case kGreyAlpha:
    case kRgba:
      return depth == 8 || depth == 16;
    default:
      return false;
  }
}

int samples_of(int colour) {
  switch (colour) {
    case kRgb:
      return 3;
    case kGreyAlpha:
      return 2;
    case kRgba:
      return 4;
    default:
      return 1;
  }
}

// Walks the chunks up to IEND, checking each CRC-32. Returns false for what the full decoder
// should judge (interlacing, eXIf, an ancillary chunk that is damaged or out of place, an
// unknown critical chunk); throws for what libpng refuses too.
bool parse(std::span<const uint8_t> d, Png& p) {
  if (d.size() < 8 || std::memcmp(d.data(), "\x89PNG\r\n\x1a\n", 8) != 0)
    corrupt("no PNG signature");
  size_t i = 8;
  bool ihdr = false, iend = false, idat_done = false;
  while (!iend) {
    if (d.size() - i < 12) throw ParseError("truncated PNG: no IEND chunk");
    const uint32_t len = be32(d.data() + i);
    if (len > 0x7FFFFFFFu) corrupt("chunk length over 2^31 - 1");
    if (len > d.size() - i - 12) throw ParseError("truncated PNG: no IEND chunk");
    const uint8_t* type = d.data() + i + 4;
    const uint8_t* body = type + 4;
    const bool critical = (type[0] & 0x20) == 0;
    if (crc32_update(0, type, size_t{len} + 4) != be32(body + len)) {
      if (!critical) return false;  // libpng drops it with a warning; let it
      corrupt("CRC-32 mismatch in chunk '" + std::string(reinterpret_cast<const char*>(type), 4) +
              "'");
    }
    i += size_t{len} + 12;
    auto is = [type](const char* name) { return std::memcmp(type, name, 4) == 0; };
    if (!ihdr) {
      if (!is("IHDR") || len != 13) corrupt("the first chunk is not IHDR");
      ihdr = true;
      p.width = be32(body);
      p.height = be32(body + 4);
      p.depth = body[8];
      p.colour = body[9];
      if (p.width == 0 || p.height == 0 || p.width > 0x7FFFFFFFu || p.height > 0x7FFFFFFFu)
        corrupt("image size " + std::to_string(p.width) + "x" + std::to_string(p.height));
      if (!valid_depth(p.colour, p.depth))
        corrupt("colour type " + std::to_string(p.colour) + " with bit depth " +
                std::to_string(p.depth));
      if (body[10] != 0 || body[11] != 0) corrupt("unknown compression or filter method");
      if (body[12] == 1) return false;  // Adam7
      if (body[12] != 0) corrupt("unknown interlace method");
      p.samples = samples_of(p.colour);
      continue;
    }
    if (is("IDAT")) {
      if (idat_done) return false;  // IDATs not in a row: libpng's call
      if (p.colour == kPalette && !p.has_palette) return false;
      if (len > 0) p.idat.emplace_back(body, len);
      p.idat_bytes += len;
      continue;
    }
    if (!p.idat.empty() || p.idat_bytes > 0) idat_done = true;
    if (is("IEND")) {
      iend = true;
    } else if (is("PLTE")) {
      if (idat_done || p.has_palette || len % 3 != 0 || len == 0 || len > 768) return false;
      if (p.colour == kGrey || p.colour == kGreyAlpha) return false;
      p.has_palette = true;
      p.palette_size = len / 3;
      if (p.colour == kPalette && p.palette_size > (1u << p.depth)) return false;
      for (uint32_t k = 0; k < len / 3; ++k)
        p.palette[k] = {body[3 * k], body[3 * k + 1], body[3 * k + 2]};
    } else if (is("tRNS")) {
      if (idat_done || p.has_trns) return false;
      p.has_trns = true;
      if (p.colour == kPalette) {
        if (!p.has_palette || len == 0 || len > p.palette_size) return false;
        p.alpha.fill(255);
        std::memcpy(p.alpha.data(), body, len);
      } else if (p.colour == kGrey && len == 2) {
        p.key[0] = be16(body);
      } else if (p.colour == kRgb && len == 6) {
        p.key[0] = be16(body);
        p.key[1] = be16(body + 2);
        p.key[2] = be16(body + 4);
      } else {
        return false;
      }
    } else if (is("eXIf")) {
      return false;  // an orientation OpenCV may apply
    } else if (critical) {
      return false;  // an unknown critical chunk: libpng refuses it, in its words
    }
  }
  if (p.idat_bytes == 0) corrupt("no image data (IDAT)");
  return true;
}

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

cv::Mat allocate(const Png& p, PngLayout layout) {
  const int rows = static_cast<int>(p.height), cols = static_cast<int>(p.width);
  if (layout == PngLayout::Bgr8) return cv::Mat(rows, cols, CV_8UC3);
  int channels = 1;
  switch (p.colour) {
    case kGrey:
      channels = 1;
      break;
    case kRgb:
      channels = p.has_trns ? 4 : 3;
      break;
    case kPalette:
      channels = p.has_trns ? 4 : 3;
      break;
    default:
      channels = 4;
  }
  const int depth = p.depth == 16 ? CV_16U : CV_8U;
  return cv::Mat(rows, cols, CV_MAKETYPE(depth, channels));
}

// Sample x of a row of 1-, 2-, 4- or 8-bit samples (most significant bits first).
inline unsigned small_sample(const uint8_t* row, uint32_t x, int depth) {
  if (depth == 8) return row[x];
  const uint32_t bit = x * static_cast<uint32_t>(depth);
  const unsigned shift = 8 - static_cast<unsigned>(depth) - (bit & 7);
  return (row[bit >> 3] >> shift) & ((1u << depth) - 1);
}

// Columns [x0, x1) of an unfiltered row into `out`, as libpng's transforms set by OpenCV's
// PNG decoder give them (png_set_strip_16 or png_set_swap, strip_alpha or tRNS_to_alpha,
// palette_to_rgb, expand_gray_1_2_4_to_8, bgr, gray_to_rgb).
void convert_row(const Png& p, PngLayout layout, const uint8_t* s, uint8_t* out, uint32_t x0,
                 uint32_t x1) {
  const bool bgr = layout == PngLayout::Bgr8;
  const bool wide = p.depth == 16;
  if (wide && !bgr) {  // 16-bit kept: native-endian uint16_t
    auto* o = reinterpret_cast<uint16_t*>(out);
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
  // 8-bit output. A 16-bit sample gives its high byte (png_set_strip_16).
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

// The IDAT payloads as one stream: the zlib header, then raw deflate fed to ISA-L chunk by
// chunk (no copy of the compressed data).
class IdatInflater {
 public:
  explicit IdatInflater(const Png& p) : p_(p), s_(std::make_unique<inflate_state>()) {
    uint8_t header[2];
    for (uint8_t& b : header) {
      while (chunk_ < p_.idat.size() && pos_ == p_.idat[chunk_].size()) ++chunk_, pos_ = 0;
      if (chunk_ == p_.idat.size())
        throw ParseError("truncated PNG: image data ends in its header");
      b = p_.idat[chunk_][pos_++];
    }
    // CM 8 (deflate), window <= 32 KiB, check bits, no preset dictionary (RFC 1950).
    if ((header[0] & 0x0F) != 8 || (header[0] >> 4) > 7 ||
        ((header[0] << 8) | header[1]) % 31 != 0 || (header[1] & 0x20) != 0)
      corrupt("bad zlib header in the image data");
    isal_inflate_init(s_.get());
    s_->crc_flag = ISAL_DEFLATE;
    feed();
  }

  /// Fills out[0, n) with the next inflated bytes; throws when the stream is corrupt or ends
  /// before n bytes, naming the row `row`.
  void read(uint8_t* out, size_t n, uint32_t row) {
    inflate_state& s = *s_;
    s.next_out = out;
    s.avail_out = static_cast<uint32_t>(n);
    while (s.avail_out > 0) {
      if (s.avail_in == 0) feed();
      const uint32_t out_before = s.avail_out, in_before = s.avail_in;
      const int r = isal_inflate(&s);
      if (r < 0)
        corrupt("image data does not inflate at row " + std::to_string(row) + ": " +
                isal_error_text(r));
      if (s.avail_out == 0) break;
      const bool progress = s.avail_out != out_before || s.avail_in != in_before;
      if (s.block_state == ISAL_BLOCK_FINISH || (!progress && s.avail_in == 0 && exhausted()))
        throw ParseError("truncated PNG: image data ends at row " + std::to_string(row) + " of " +
                         std::to_string(p_.height));
      if (!progress && s.avail_in > 0) corrupt("image data does not inflate");
    }
  }

 private:
  bool exhausted() const { return chunk_ >= p_.idat.size(); }
  void feed() {
    while (chunk_ < p_.idat.size() && pos_ == p_.idat[chunk_].size()) ++chunk_, pos_ = 0;
    if (chunk_ == p_.idat.size()) return;
    const auto c = p_.idat[chunk_];
    s_->next_in = const_cast<uint8_t*>(c.data() + pos_);
    s_->avail_in = static_cast<uint32_t>(c.size() - pos_);
    ++chunk_;
    pos_ = 0;
  }

  const Png& p_;
  std::unique_ptr<inflate_state> s_;
  size_t chunk_ = 0, pos_ = 0;
};

}  // namespace

bool png_region_decodable(std::span<const uint8_t> d) {
  if (d.size() < 33 || std::memcmp(d.data(), "\x89PNG\r\n\x1a\n", 8) != 0 ||
      std::memcmp(d.data() + 12, "IHDR", 4) != 0 || d[28] != 0)
    return false;
  for (size_t i = 8; d.size() - i >= 12;) {
    const uint32_t len = be32(d.data() + i);
    if (len > d.size() - i - 12) return false;
    const uint8_t* type = d.data() + i + 4;
    if (std::memcmp(type, "IEND", 4) == 0) return true;
    if (std::memcmp(type, "eXIf", 4) == 0) return false;
    i += size_t{len} + 12;
  }
  return false;
}

std::optional<cv::Mat> decode_png_region(std::span<const uint8_t> data, PngLayout layout,
                                         cv::Rect rect, uint64_t max_pixels) {
  Png p;
  if (!parse(data, p)) return std::nullopt;
  const uint64_t pixels = uint64_t{p.width} * p.height;
  if (pixels > max_pixels)
    throw ParseError("image is " + std::to_string(p.width) + "x" + std::to_string(p.height) +
                     " = " + std::to_string(pixels) + " pixels, over --max-pixels " +
                     std::to_string(max_pixels));
  const uint64_t bits_per_pixel = uint64_t(p.samples) * uint64_t(p.depth);
  const uint64_t row_bytes = (uint64_t{p.width} * bits_per_pixel + 7) / 8;
  if (row_bytes > (1u << 30)) corrupt("rows of " + std::to_string(row_bytes) + " bytes");
  // Deflate expands at most 1032:1, so data this small cannot hold this many rows: refused
  // before anything of the image's size is allocated.
  const uint64_t filtered = (row_bytes + 1) * p.height;  // < 2^62
  if (filtered / 1032 > p.idat_bytes + 64)
    corrupt(std::to_string(p.width) + "x" + std::to_string(p.height) + " image in only " +
            std::to_string(p.idat_bytes) + " bytes of image data");

  const cv::Rect whole(0, 0, static_cast<int>(p.width), static_cast<int>(p.height));
  const cv::Rect r = rect & whole;
  const uint32_t y0 = r.empty() ? p.height : static_cast<uint32_t>(r.y);
  const uint32_t y1 = r.empty() ? p.height : static_cast<uint32_t>(r.y + r.height);
  const uint32_t x0 = static_cast<uint32_t>(r.x), x1 = static_cast<uint32_t>(r.x + r.width);
  cv::Mat out = allocate(p, layout);

  const size_t bpp = std::max<size_t>(1, bits_per_pixel / 8);
  const size_t stride = row_bytes + 1;
  // Rows are inflated in batches of about 256 KiB, unfiltered in place; the last row of a
  // batch is kept as the row above the next batch's first.
  const size_t batch_rows = std::max<size_t>(1, (size_t{256} << 10) / stride);
  std::vector<uint8_t> buf(batch_rows * stride);
  std::vector<uint8_t> prev(row_bytes, 0);
  IdatInflater in(p);
  for (uint32_t y = 0; y < y1;) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(batch_rows, y1 - y));
    in.read(buf.data(), n * stride, y);
    for (uint32_t k = 0; k < n; ++k, ++y) {
      uint8_t* row = buf.data() + k * stride;
      const uint8_t* above = k == 0 ? prev.data() : row - stride + 1;
      if (row[0] > 4)
        corrupt("unknown filter type " + std::to_string(row[0]) + " at row " + std::to_string(y));
      unfilter(row + 1, above, row_bytes, bpp, row[0]);
      if (y >= y0 && x1 > x0)
        convert_row(p, layout, row + 1, out.ptr<uint8_t>(static_cast<int>(y)), x0, x1);
    }
    std::memcpy(prev.data(), buf.data() + (n - 1) * stride + 1, row_bytes);
  }
  return out;
}

}  // namespace tarmac
