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
#include "transform/png_region_internal.h"

namespace tarmac {
namespace {

using namespace png_detail;

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
