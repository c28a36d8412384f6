#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "transform/image_codec.h"
#include "transform/png_region.h"

using namespace tarmac;

namespace {

constexpr uint64_t kRegionMaxPixels = 1ull << 30;

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& body) {
  put32(out, static_cast<uint32_t>(body.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), body.begin(), body.end());
  put32(out, crc32_update(0, out.data() + start, out.size() - start));
}

struct Spec {
  int w = 0, h = 0, colour = 0, depth = 8;
  std::vector<uint8_t> plte, trns;
  bool interlaced = false;
};

int samples(int colour) {
  return colour == 2 ? 3 : colour == 4 ? 2 : colour == 6 ? 4 : 1;
}

// Applies PNG filter `type` to row `cur` (above: `prev`), bpp bytes per pixel.
std::vector<uint8_t> filter_row(const std::vector<uint8_t>& cur, const std::vector<uint8_t>& prev,
                                size_t bpp, int type) {
  std::vector<uint8_t> f(cur.size());
  for (size_t k = 0; k < cur.size(); ++k) {
    const int a = k >= bpp ? cur[k - bpp] : 0, b = prev[k], c = k >= bpp ? prev[k - bpp] : 0;
    int pred = 0;
    if (type == 1) pred = a;
    if (type == 2) pred = b;
    if (type == 3) pred = (a + b) / 2;
    if (type == 4) {
      const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
      pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
    }
    f[k] = static_cast<uint8_t>(cur[k] - pred);
  }
  return f;
}

// A PNG written by hand: any colour type and depth, row filters cycling through all five
// (what OpenCV's encoder cannot be asked for), random samples from `seed`.
std::vector<uint8_t> make_png(const Spec& s, unsigned seed, std::vector<uint8_t> stream = {}) {
  const size_t bits = size_t(samples(s.colour)) * s.depth;
  const size_t row_bytes = (size_t(s.w) * bits + 7) / 8, bpp = std::max<size_t>(1, bits / 8);
  if (stream.empty()) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> prev(row_bytes, 0), raw;
    for (int y = 0; y < s.h; ++y) {
      std::vector<uint8_t> cur(row_bytes);
      for (size_t k = 0; k < row_bytes; ++k)  // smooth-ish with noise, so filters matter
        cur[k] = static_cast<uint8_t>((k * 7 + size_t(y) * 3) / 4 + (rng() % 5));
      if (s.depth < 8 && s.w * bits % 8 != 0)
        cur.back() &= static_cast<uint8_t>(0xFF << (8 - s.w * bits % 8));
      const int type = (y + static_cast<int>(seed)) % 5;
      raw.push_back(static_cast<uint8_t>(type));
      const auto f = filter_row(cur, prev, bpp, type);
      raw.insert(raw.end(), f.begin(), f.end());
      prev = cur;
    }
    uLongf n = compressBound(raw.size());
    stream.resize(n);
    REQUIRE(compress2(stream.data(), &n, raw.data(), raw.size(), 6) == Z_OK);
    stream.resize(n);
  }
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, static_cast<uint32_t>(s.w));
  put32(ihdr, static_cast<uint32_t>(s.h));
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(s.depth), static_cast<uint8_t>(s.colour), 0, 0,
                           static_cast<uint8_t>(s.interlaced)});
  chunk(out, "IHDR", ihdr);
  if (!s.plte.empty()) chunk(out, "PLTE", s.plte);
  if (!s.trns.empty()) chunk(out, "tRNS", s.trns);
  // Several IDATs, split at odd sizes (even inside the zlib header).
  for (size_t i = 0; i < stream.size();) {
    const size_t n = std::min<size_t>(i == 0 ? 1 : 777, stream.size() - i);
    chunk(out, "IDAT", {stream.begin() + long(i), stream.begin() + long(i + n)});
    i += n;
  }
  chunk(out, "IEND", {});
  return out;
}

std::vector<uint8_t> palette(int entries) {
  std::vector<uint8_t> p;
  for (int i = 0; i < entries; ++i)
    p.insert(p.end(), {static_cast<uint8_t>(i * 37), static_cast<uint8_t>(255 - i),
                       static_cast<uint8_t>(i * 11 + 5)});
  return p;
}

bool same(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return false;
  for (int y = 0; y < a.rows; ++y)
    if (std::memcmp(a.ptr(y), b.ptr(y), a.cols * a.elemSize()) != 0) return false;
  return true;
}

// Every region of `png` decoded both ways equals cv::imdecode's whole image, cropped.
void check_regions(const std::vector<uint8_t>& png) {
  const cv::Mat buf(1, static_cast<int>(png.size()), CV_8U, const_cast<uint8_t*>(png.data()));
  const cv::Mat unchanged = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
  const cv::Mat colour = cv::imdecode(buf, cv::IMREAD_COLOR);
  REQUIRE_FALSE(unchanged.empty());
  const int w = unchanged.cols, h = unchanged.rows;
  const std::vector<cv::Rect> rects = {
      {0, 0, w, h},                                            // full
      {0, 0, w, std::max(1, h / 3)},                           // top
      {0, h - std::max(1, h / 3), w, h / 3 + 1},               // bottom
      {w / 4, h / 3, std::max(1, w / 2), std::max(1, h / 4)},  // middle
      {w - 1, 1, 5, 2},                                        // a column at the edge, clipped
  };
  for (const cv::Rect& r0 : rects) {
    const cv::Rect r = r0 & cv::Rect(0, 0, w, h);
    if (r.empty()) continue;
    CAPTURE(r.x, r.y, r.width, r.height);
    const auto u = decode_png_region(png, PngLayout::Unchanged, r0, kRegionMaxPixels);
    REQUIRE(u.has_value());
    CHECK(same((*u)(r), unchanged(r)));
    const auto c = decode_png_region(png, PngLayout::Bgr8, r0, kRegionMaxPixels);
    REQUIRE(c.has_value());
    CHECK(same((*c)(r), colour(r)));
  }
}

cv::Mat noisy(int w, int h, int type, unsigned seed) {
  cv::Mat m(h, w, type);
  cv::RNG rng(seed);
  const double top = CV_MAT_DEPTH(type) == CV_16U ? 65535 : 255;
  rng.fill(m, cv::RNG::UNIFORM, 0, top);
  for (int y = 0; y < h / 2; ++y)  // half smooth, half noise: both kinds of rows
    m.row(y).setTo(cv::Scalar::all(top * y / h));
  return m;
}

std::vector<uint8_t> cv_png(const cv::Mat& m, std::vector<int> params = {}) {
  std::vector<uint8_t> out;
  REQUIRE(cv::imencode(".png", m, out, params));
  return out;
}

}  // namespace

TEST_CASE("png region decode equals imdecode for every type OpenCV encodes") {
  for (int type : {CV_8UC1, CV_8UC3, CV_8UC4, CV_16UC1, CV_16UC3, CV_16UC4}) {
    CAPTURE(type);
    for (int strategy : {cv::IMWRITE_PNG_STRATEGY_DEFAULT, cv::IMWRITE_PNG_STRATEGY_FILTERED,
                         cv::IMWRITE_PNG_STRATEGY_RLE})
      check_regions(cv_png(noisy(61, 47, type, 7), {cv::IMWRITE_PNG_STRATEGY, strategy}));
  }
  // 1-bit grey.
  cv::Mat bw = noisy(45, 30, CV_8UC1, 3) > 128;
  check_regions(cv_png(bw, {cv::IMWRITE_PNG_BILEVEL, 1}));
  // A frame: many IDATs, rows of thousands of bytes.
  check_regions(cv_png(noisy(1000, 300, CV_8UC3, 11)));
}

TEST_CASE("png region decode equals imdecode for every colour type and bit depth") {
  struct Case {
    int colour, depth;
  };
  const std::vector<Case> cases = {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {2, 8}, {2, 16}, {3, 1},
                                   {3, 2}, {3, 4}, {3, 8}, {4, 8}, {4, 16}, {6, 8}, {6, 16}};
  for (const Case c : cases) {
    // Widths about the 16-byte steps of the vectorised Sub filter and RGB shuffle, and past.
    for (int w : {1, 5, 7, 16, 17, 33, 100}) {
      CAPTURE(c.colour, c.depth, w);
      Spec s;
      s.w = w;
      s.h = 23;
      s.colour = c.colour;
      s.depth = c.depth;
      if (c.colour == 3) s.plte = palette(1 << c.depth);
      check_regions(make_png(s, static_cast<unsigned>(w)));
    }
  }
}

TEST_CASE("png region decode applies tRNS as libpng does") {
  Spec s;
  s.w = 19;
  s.h = 11;
  SECTION("palette, fewer alphas than entries, indices past the palette") {
    s.colour = 3;
    s.depth = 8;
    s.plte = palette(200);  // random indices reach 255: black, as libpng's zeroed palette
    s.trns = {0, 128, 255, 7};
    check_regions(make_png(s, 1));
  }
  SECTION("palette of 4 bits") {
    s.colour = 3;
    s.depth = 4;
    s.plte = palette(16);
    s.trns = {0, 50, 100};
    check_regions(make_png(s, 2));
  }
  SECTION("rgb colour key, 8 and 16 bits") {
    s.colour = 2;
    for (int depth : {8, 16}) {
      s.depth = depth;
      // A key equal to some pixel: make a flat image (all filter-0 rows of one value).
      const size_t row = size_t(s.w) * 3 * depth / 8;
      std::vector<uint8_t> raw;
      for (int y = 0; y < s.h; ++y) {
        raw.push_back(0);
        for (size_t k = 0; k < row; ++k) raw.push_back(static_cast<uint8_t>(y < 5 ? 9 : k));
      }
      uLongf n = compressBound(raw.size());
      std::vector<uint8_t> z(n);
      REQUIRE(compress2(z.data(), &n, raw.data(), raw.size(), 6) == Z_OK);
      z.resize(n);
      s.trns = {0, 9, 0, 9, 0, 9};
      if (depth == 16) s.trns = {9, 9, 9, 9, 9, 9};
      check_regions(make_png(s, 0, z));
    }
  }
  SECTION("grey colour key (ignored by both)") {
    s.colour = 0;
    s.depth = 8;
    s.trns = {0, 40};
    check_regions(make_png(s, 3));
  }
}

TEST_CASE("png region decode refuses malformed data with a clear error") {
  Spec s;
  s.w = 40;
  s.h = 30;
  s.colour = 2;
  s.depth = 8;
  const std::vector<uint8_t> good = make_png(s, 4);
  const cv::Rect all(0, 0, 40, 30);
  REQUIRE(decode_png_region(good, PngLayout::Bgr8, all, kRegionMaxPixels).has_value());

  SECTION("truncated image data") {
    // Well-formed chunks around half a zlib stream.
    std::vector<uint8_t> raw((40 * 3 + 1) * 30, 0);
    uLongf n = compressBound(raw.size());
    std::vector<uint8_t> z(n);
    REQUIRE(compress2(z.data(), &n, raw.data(), raw.size(), 6) == Z_OK);
    z.resize(n / 2);
    REQUIRE_THROWS_AS(decode_png_region(make_png(s, 0, z), PngLayout::Bgr8, all, kRegionMaxPixels),
                      ParseError);
    // The file itself cut short.
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(good.size() / 2));
    REQUIRE_THROWS_AS(decode_png_region(cut, PngLayout::Bgr8, all, kRegionMaxPixels), ParseError);
  }
  SECTION("bad CRC") {
    std::vector<uint8_t> bad = good;
    bad[bad.size() - 20] ^= 1;  // inside the last IDAT
    REQUIRE_THROWS_WITH(decode_png_region(bad, PngLayout::Bgr8, all, kRegionMaxPixels),
                        Catch::Contains("CRC-32"));
  }
  SECTION("wrong filter byte") {
    std::vector<uint8_t> raw((40 * 3 + 1) * 30, 0);
    raw[(40 * 3 + 1) * 3] = 5;  // row 3
    uLongf n = compressBound(raw.size());
    std::vector<uint8_t> z(n);
    REQUIRE(compress2(z.data(), &n, raw.data(), raw.size(), 6) == Z_OK);
    z.resize(n);
    REQUIRE_THROWS_WITH(
        decode_png_region(make_png(s, 0, z), PngLayout::Bgr8, all, kRegionMaxPixels),
        Catch::Contains("filter type 5 at row 3"));
    // Rows above it still decode: the bad row is never read.
    REQUIRE(decode_png_region(make_png(s, 0, z), PngLayout::Bgr8, {0, 0, 40, 3}, kRegionMaxPixels)
                .has_value());
  }
  SECTION("huge dimensions, tiny data") {
    Spec huge = s;
    huge.w = 100000;
    huge.h = 100000;
    std::vector<uint8_t> z = {0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01};
    REQUIRE_THROWS_WITH(decode_png_region(make_png(huge, 0, z), PngLayout::Bgr8, all, ~0ull),
                        Catch::Contains("bytes of image data"));
    REQUIRE_THROWS_WITH(
        decode_png_region(make_png(huge, 0, z), PngLayout::Bgr8, all, kRegionMaxPixels),
        Catch::Contains("max-pixels"));
  }
  SECTION("no IEND, bad signature, bad IHDR") {
    std::vector<uint8_t> no_end(good.begin(), good.end() - 12);
    REQUIRE_THROWS_WITH(decode_png_region(no_end, PngLayout::Bgr8, all, kRegionMaxPixels),
                        Catch::Contains("IEND"));
    std::vector<uint8_t> sig = good;
    sig[1] = 'Q';
    REQUIRE_THROWS_AS(decode_png_region(sig, PngLayout::Bgr8, all, kRegionMaxPixels), ParseError);
    Spec odd = s;
    odd.depth = 4;  // RGB of 4 bits does not exist
    REQUIRE_THROWS_WITH(
        decode_png_region(make_png(odd, 0, {0x78, 0x9c}), PngLayout::Bgr8, all, kRegionMaxPixels),
        Catch::Contains("bit depth"));
  }
  SECTION("any cut or flipped byte: an error or pixels, never a crash") {
    std::mt19937 rng(5);
    for (size_t n = 0; n < good.size(); n += 3) {
      std::vector<uint8_t> d(good.begin(), good.begin() + long(n));
      try {
        (void)decode_png_region(d, PngLayout::Unchanged, all, kRegionMaxPixels);
      } catch (const ParseError&) {
      }
    }
    for (int k = 0; k < 300; ++k) {
      std::vector<uint8_t> d = good;
      d[rng() % d.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      try {
        (void)decode_png_region(d, PngLayout::Bgr8, {3, 5, 10, 10}, kRegionMaxPixels);
      } catch (const ParseError&) {
      }
    }
  }
}

TEST_CASE("png region decode leaves interlaced PNGs to the full decoder, counted") {
  // 1x1: Adam7's first pass is the whole image, so the non-interlaced stream is valid.
  Spec s;
  s.w = 1;
  s.h = 1;
  s.colour = 2;
  s.interlaced = true;
  const std::vector<uint8_t> png = make_png(s, 1);
  REQUIRE_FALSE(
      decode_png_region(png, PngLayout::Bgr8, {0, 0, 1, 1}, kRegionMaxPixels).has_value());
  REQUIRE_FALSE(png_region_decodable(png));
  const uint64_t before = png_opencv_decodes();
  const cv::Mat buf(1, static_cast<int>(png.size()), CV_8U, const_cast<uint8_t*>(png.data()));
  CHECK(same(decode_image(png, kRegionMaxPixels), cv::imdecode(buf, cv::IMREAD_COLOR)));
  CHECK(same(decode_dense(png, kRegionMaxPixels), cv::imdecode(buf, cv::IMREAD_UNCHANGED)));
  REQUIRE(png_opencv_decodes() == before + 2);
}
