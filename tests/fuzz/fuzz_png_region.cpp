// libFuzzer target: the PNG region decoder (lib/transform/png_region.h) on arbitrary bytes, as
// convert calls it: both layouts, the whole image and small regions, on the bytes as given and
// with their chunks' CRC-32s made right. Each call must return a matrix of the image's size (or
// nullopt: left to the full decoder) or throw ParseError.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <opencv2/core.hpp>

#include "common/crc32.h"
#include "common/error.h"
#include "transform/png_region.h"

namespace {
constexpr uint64_t kMaxPixels = 1 << 20;  // small, so that a claimed huge size is refused early

void decode(std::span<const uint8_t> bytes, tarmac::PngLayout layout, cv::Rect rect) {
  try {
    const std::optional<cv::Mat> m = tarmac::decode_png_region(bytes, layout, rect, kMaxPixels);
    if (m && (m->empty() || uint64_t(m->rows) * uint64_t(m->cols) > kMaxPixels)) __builtin_trap();
    if (m && layout == tarmac::PngLayout::Bgr8 && m->type() != CV_8UC3) __builtin_trap();
  } catch (const tarmac::ParseError&) {
  }
}
// The input with every chunk's CRC-32 made right, so that mutations reach the inflater, the
// filters and the pixel conversions instead of stopping at the first CRC check.
std::vector<uint8_t> with_crcs(std::span<const uint8_t> d) {
  std::vector<uint8_t> out(d.begin(), d.end());
  for (size_t i = 8; out.size() >= 12 && i <= out.size() - 12;) {
    const uint32_t len = (uint32_t{out[i]} << 24) | (uint32_t{out[i + 1]} << 16) |
                         (uint32_t{out[i + 2]} << 8) | out[i + 3];
    if (len > out.size() - i - 12) break;
    const uint32_t crc = tarmac::crc32_update(0, out.data() + i + 4, size_t{len} + 4);
    for (int k = 0; k < 4; ++k) out[i + 8 + len + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
    i += size_t{len} + 12;
  }
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)tarmac::png_region_decodable(bytes);
  decode(bytes, tarmac::PngLayout::Bgr8, {0, 0, 1 << 20, 1 << 20});
  decode(bytes, tarmac::PngLayout::Unchanged, {0, 0, 1 << 20, 1 << 20});
  decode(bytes, tarmac::PngLayout::Bgr8, {3, 2, 5, 4});
  decode(bytes, tarmac::PngLayout::Unchanged, {1, 1, 1, 1});
  const std::vector<uint8_t> fixed = with_crcs(bytes);
  decode(fixed, tarmac::PngLayout::Bgr8, {0, 0, 1 << 20, 1 << 20});
  decode(fixed, tarmac::PngLayout::Unchanged, {2, 1, 1 << 20, 3});
  return 0;
}
