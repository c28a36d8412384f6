#include "transform/jpeg_region.h"

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <csetjmp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "transform/warp.h"

namespace tarmac {
namespace {

// libjpeg reports fatal errors through error_exit, which must not return: we longjmp back.
// Only trivially destructible objects live between setjmp and longjmp (see decode_rows).
struct Decoder {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr jerr{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  int warnings = 0;
  bool created = false;
  ~Decoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

void on_error(j_common_ptr c) {
  auto* d = reinterpret_cast<Decoder*>(c->client_data);
  (*c->err->format_message)(c, d->message);
  std::longjmp(d->jump, 1);
}

void on_message(j_common_ptr c, int level) {
  if (level >= 0) return;  // trace messages
  auto* d = reinterpret_cast<Decoder*>(c->client_data);
  // "Corrupt JPEG data: N extraneous bytes before marker" is common in camera files and
  // harmless; every other warning (premature end, bad Huffman code) means damaged data.
  char msg[JMSG_LENGTH_MAX];
  (*c->err->format_message)(c, msg);
  if (!std::strstr(msg, "extraneous bytes")) {
    if (d->warnings++ == 0) std::snprintf(d->message, sizeof d->message, "%s", msg);
  }
}

struct Plan {  // what to decode, in scaled coordinates
  int denom = 1;
  J_COLOR_SPACE colour = JCS_EXT_BGR;
  int channels = 3;
  unsigned image_w = 0, image_h = 0;        // the size the caller expects; 0: any
  std::vector<uint8_t>* scratch = nullptr;  // where the pixels go, if not a new matrix
  unsigned x0 = 0, width = 0;               // columns (before jpeg_crop_scanline widens them)
  unsigned y0 = 0, y1 = 0;                  // rows [y0, y1)
  /// Decode every row at full width into the output, and set x0 and width to the columns
  /// jpeg_crop_scanline would have given for them.
  bool whole = false;
};

// Runs libjpeg over the planned rows. Returns false (message set) on error. Only POD locals.
bool decode_rows(Decoder& d, std::span<const uint8_t> data, Plan& plan, cv::Mat* out,
                 bool header_only, unsigned* scaled_w, unsigned* scaled_h) {
  if (setjmp(d.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  d.cinfo.client_data = &d;
  jpeg_mem_src(&d.cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&d.cinfo, TRUE);
  d.cinfo.out_color_space = plan.colour;
  d.cinfo.scale_num = 1;
  d.cinfo.scale_denom = static_cast<unsigned>(plan.denom);
  d.cinfo.dct_method = JDCT_ISLOW;
  jpeg_calc_output_dimensions(&d.cinfo);
  *scaled_w = d.cinfo.output_width;
  *scaled_h = d.cinfo.output_height;
  if (header_only) return true;
  if (plan.image_w > 0 &&
      (d.cinfo.image_width != plan.image_w || d.cinfo.image_height != plan.image_h)) {
    std::snprintf(d.message, sizeof d.message, "the header says %ux%u, expected %ux%u",
                  d.cinfo.image_width, d.cinfo.image_height, plan.image_w, plan.image_h);
    return false;
  }
  jpeg_start_decompress(&d.cinfo);
  const unsigned full_width = d.cinfo.output_width;
  if (plan.width > 0 && plan.width < full_width && plan.whole) {
    // jpeg_crop_scanline's own rule (libjpeg-turbo's jdapistd.c): the first column moves left
    // to an iMCU boundary, the last stays.
    const unsigned align =
        static_cast<unsigned>(d.cinfo.comps_in_scan == 1 && d.cinfo.num_components == 1
                                  ? d.cinfo.min_DCT_scaled_size
                                  : d.cinfo.min_DCT_scaled_size * d.cinfo.max_h_samp_factor);
    const unsigned x0 = plan.x0 / align * align;
    plan.width += plan.x0 - x0;
    plan.x0 = x0;
  } else if (plan.width > 0 && plan.width < full_width) {
    jpeg_crop_scanline(&d.cinfo, &plan.x0, &plan.width);
  } else {
    plan.x0 = 0;
    plan.width = full_width;
  }
  const unsigned first = plan.whole ? 0 : plan.y0,
                 last = plan.whole ? d.cinfo.output_height : plan.y1;
  const int rows = static_cast<int>(last - first),
            cols = static_cast<int>(plan.whole ? full_width : plan.width);
  if (plan.scratch) {
    const size_t need = size_t(rows) * size_t(cols) * size_t(plan.channels);
    if (plan.scratch->size() < need) {  // grown without copying what it held
      plan.scratch->clear();
      plan.scratch->resize(need);
    }
    *out = cv::Mat(rows, cols, CV_8UC(plan.channels), plan.scratch->data());
  } else {
    out->create(rows, cols, CV_8UC(plan.channels));
  }
  if (first > 0) jpeg_skip_scanlines(&d.cinfo, first);
  // Up to a row group per call (16 rows for 4:2:0), not one row: less per-call work.
  JSAMPROW group[16];
  while (d.cinfo.output_scanline < last) {
    const unsigned n = std::min(16u, last - d.cinfo.output_scanline);
    for (unsigned k = 0; k < n; ++k)
      group[k] = out->ptr<uint8_t>(static_cast<int>(d.cinfo.output_scanline + k - first));
    if (jpeg_read_scanlines(&d.cinfo, group, n) == 0) {
      std::snprintf(d.message, sizeof d.message, "the decoder stopped at row %u",
                    d.cinfo.output_scanline);
      return false;
    }
  }
  if (last == d.cinfo.output_height)
    jpeg_finish_decompress(&d.cinfo);  // reads to the EOI marker: catches truncation
  else
    jpeg_abort_decompress(&d.cinfo);
  return true;
}

void new_decoder(Decoder& d) {
  d.cinfo.err = jpeg_std_error(&d.jerr);
  d.jerr.error_exit = on_error;
  d.jerr.emit_message = on_message;
}

bool ends_with_eoi(std::span<const uint8_t> data) {
  // Allow trailing padding bytes after EOI, as some writers add.
  size_t n = data.size();
  size_t i = n >= 2 ? n - 2 : 0;
  for (size_t k = 0; k < 64 && i > 0; ++k, --i)
    if (data[i] == 0xFF && data[i + 1] == 0xD9) return true;
  return false;
}

}  // namespace

int region_dct_denom(const Geometry& g, ResampleMode mode) {
  // A DCT-scaled decode keeps each 8x8 block's low frequencies; its errors repeat with the
  // blocks, so a filter removes them only once a block spans under ~2.5 output pixels
  // (s <= 0.3). There: the smallest scale 1/2^k that leaves a shrink of at most 0.6 (1.67 or
  // more decoded pixels per output pixel), then the cubic filter, which loses less than an
  // area average of pixels already low-passed (the two together fall 0.1-1.2 dB below
  // INTER_AREA; the cubic 1-6 dB above; tests/e2e/test_resample.py, docs/performance.md).
  // Above 0.3: the full decode, as INTER_AREA sees it (libjpeg's plain chroma upsampling
  // instead of its triangle filter would save 3 % of W2's time and cost up to 5 dB).
  const double s = std::max(g.m[0], g.m[4]);
  int denom = 1;
  if (mode == ResampleMode::Area && s <= kDctScaleMax + 1e-9)
    while (denom < 8 && s * denom * 2 <= kDctShrinkMax + 1e-9) denom *= 2;
  return denom;
}

RegionDecode decode_jpeg_region(std::span<const uint8_t> data, int w, int h, const Geometry& g,
                                ResampleMode mode, std::vector<uint8_t>* scratch, cv::Mat* whole) {
  const int denom = region_dct_denom(g, mode);
  const double sx = g.m[0], sy = g.m[4];

  // Source region the output needs, in full-resolution coordinates, plus a margin for the
  // resampler's support (the area footprint, the cubic's reach of 2 / s, bilinear taps).
  const double ux0 = (-0.5 - g.m[2]) / sx, ux1 = (g.out_width - 0.5 - g.m[2]) / sx;
  const double uy0 = (-0.5 - g.m[5]) / sy, uy1 = (g.out_height - 0.5 - g.m[5]) / sy;
  const double margin = 2.0 / std::min(sx, sy) + 2 * denom;

  Decoder d;
  new_decoder(d);
  Plan plan;
  plan.denom = denom;
  plan.scratch = scratch;
  unsigned sw = 0, shh = 0;
  if (!decode_rows(d, data, plan, nullptr, true, &sw, &shh))
    throw ParseError(std::string("corrupt JPEG: ") + d.message);
  auto to_scaled = [&](double u) { return (u + 0.5) / denom - 0.5; };
  const double fx0 = to_scaled(ux0 - margin), fx1 = to_scaled(ux1 + margin);
  const double fy0 = to_scaled(uy0 - margin), fy1 = to_scaled(uy1 + margin);
  const int cx0 = std::clamp(static_cast<int>(std::floor(fx0)), 0, static_cast<int>(sw));
  const int cx1 = std::clamp(static_cast<int>(std::ceil(fx1)) + 1, 0, static_cast<int>(sw));
  const int cy0 = std::clamp(static_cast<int>(std::floor(fy0)), 0, static_cast<int>(shh));
  const int cy1 = std::clamp(static_cast<int>(std::ceil(fy1)) + 1, 0, static_cast<int>(shh));

  RegionDecode r;
  r.denom = denom;
  if (cx1 <= cx0 || cy1 <= cy0) {  // the crop lies wholly outside the image
    if (whole)
      *whole = decode_jpeg_scaled(data, w, h, denom,
                                  cv::Rect(0, 0, static_cast<int>(sw), static_cast<int>(shh)),
                                  JpegPixels::Bgr, scratch)
                   .pixels;
    else
      validate_jpeg(data);
    r.m = g.m;
    return r;
  }
  plan.x0 = static_cast<unsigned>(cx0);
  plan.width = static_cast<unsigned>(cx1 - cx0);
  plan.y0 = static_cast<unsigned>(cy0);
  plan.y1 = static_cast<unsigned>(cy1);
  plan.whole = whole != nullptr;

  Decoder d2;
  new_decoder(d2);
  cv::Mat pixels;
  if (!decode_rows(d2, data, plan, &pixels, false, &sw, &shh))
    throw ParseError(std::string("corrupt or truncated JPEG: ") + d2.message);
  if (d2.warnings > 0) throw ParseError(std::string("corrupt or truncated JPEG: ") + d2.message);
  if (!ends_with_eoi(data)) throw ParseError("truncated JPEG: no end-of-image marker");
  if (whole) {
    *whole = pixels;
    pixels = pixels(cv::Rect(static_cast<int>(plan.x0), static_cast<int>(plan.y0),
                             static_cast<int>(plan.width), static_cast<int>(plan.y1 - plan.y0)));
  }

  // Pixel (p, q) of `pixels` is scaled pixel (x0 + p, y0 + q), whose centre lies at
  // full-resolution u = denom * (x0 + p) + (denom - 1) / 2.
  const Affine to_full = {double(denom),
                          0,
                          denom * double(plan.x0) + (denom - 1) / 2.0,
                          0,
                          double(denom),
                          denom * double(plan.y0) + (denom - 1) / 2.0};
  r.pixels = pixels;
  r.m = compose(g.m, to_full);
  if (denom > 1) r.filter = ShrinkFilter::Cubic;
  return r;
}

ScaledRegion decode_jpeg_scaled(std::span<const uint8_t> data, int w, int h, int denom,
                                cv::Rect rect, JpegPixels pixels, std::vector<uint8_t>* scratch) {
  if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
    throw ArgumentError("decode_jpeg_scaled: denom must be 1, 2, 4 or 8");
  // libjpeg's scaled size (jdiv_round_up) of the size decode_rows checks.
  const int sw = (w + denom - 1) / denom, sh = (h + denom - 1) / denom;
  rect &= cv::Rect(0, 0, sw, sh);
  ScaledRegion r;
  r.denom = denom;
  if (rect.empty()) return r;
  Plan plan;
  plan.denom = denom;
  plan.colour = pixels == JpegPixels::Grey  ? JCS_GRAYSCALE
                : pixels == JpegPixels::Rgb ? JCS_EXT_RGB
                                            : JCS_EXT_BGR;
  plan.channels = pixels == JpegPixels::Grey ? 1 : 3;
  plan.x0 = static_cast<unsigned>(rect.x);
  plan.width = static_cast<unsigned>(rect.width);
  plan.y0 = static_cast<unsigned>(rect.y);
  plan.y1 = static_cast<unsigned>(rect.y + rect.height);
  plan.image_w = static_cast<unsigned>(w);
  plan.image_h = static_cast<unsigned>(h);
  plan.scratch = scratch;
  Decoder d;
  new_decoder(d);
  unsigned dw = 0, dh = 0;
  if (!decode_rows(d, data, plan, &r.pixels, false, &dw, &dh) || d.warnings > 0)
    throw ParseError(std::string("corrupt or truncated JPEG: ") + d.message);
  if (!ends_with_eoi(data)) throw ParseError("truncated JPEG: no end-of-image marker");
  r.x0 = static_cast<int>(plan.x0);
  r.y0 = static_cast<int>(plan.y0);
  return r;
}

Affine ScaledRegion::to_full() const {
  return {double(denom),
          0,
          denom * double(x0) + (denom - 1) / 2.0,
          0,
          double(denom),
          denom * double(y0) + (denom - 1) / 2.0};
}

void validate_jpeg(std::span<const uint8_t> data) {
  Decoder d;
  new_decoder(d);
  Plan plan;
  plan.denom = 8;
  unsigned sw = 0, sh = 0;
  if (!decode_rows(d, data, plan, nullptr, true, &sw, &sh))
    throw ParseError(std::string("corrupt JPEG: ") + d.message);
  Decoder d2;
  new_decoder(d2);
  plan.y0 = 0;
  plan.y1 = sh;
  cv::Mat pixels;
  if (!decode_rows(d2, data, plan, &pixels, false, &sw, &sh) || d2.warnings > 0)
    throw ParseError(std::string("corrupt or truncated JPEG: ") + d2.message);
}

}  // namespace tarmac
