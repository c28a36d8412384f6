#pragma once
// Internals of the PNG region decoder (transform/png_region.h), shared by its two files:
// png_region.cpp walks the chunks and inflates the IDAT stream, png_rows.cpp unfilters each
// row and converts its pixels to the layout OpenCV's decoder gives.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transform/png_region.h"

namespace tarmac::png_detail {

inline uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint16_t be16(const uint8_t* p) {
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

/// Unfilters `row` (n bytes, filter `type`) in place against `prev`, the unfiltered row above
/// (all zeros for the first); bpp bytes per pixel (1, 2, 3, 4, 6 or 8).
void unfilter(uint8_t* row, const uint8_t* prev, size_t n, size_t bpp, int type);

/// Columns [x0, x1) of an unfiltered row `s` into `out`, as libpng's transforms set by OpenCV's
/// PNG decoder give them (png_set_strip_16 or png_set_swap, strip_alpha or tRNS_to_alpha,
/// palette_to_rgb, expand_gray_1_2_4_to_8, bgr, gray_to_rgb).
void convert_row(const Png& p, PngLayout layout, const uint8_t* s, uint8_t* out, uint32_t x0,
                 uint32_t x1);

}  // namespace tarmac::png_detail
