#include <catch2/catch.hpp>
#include <cmath>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include <turbojpeg.h>

#include "common/error.h"
#include "transform/image_codec.h"
#include "transform/jpeg_region.h"
#include "transform/resample.h"
#include "transform/warp.h"

using namespace tarmac;

namespace {

// Smooth content, so that resampling differences are small and misalignment is not.
cv::Mat smooth_image(int w, int h, double period = 1.0) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      m.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uint8_t>(128 + 100 * std::sin(x / (37.0 * period))),
                    static_cast<uint8_t>(128 + 100 * std::cos(y / (29.0 * period))),
                    static_cast<uint8_t>(128 + 80 * std::sin((x + y) / (53.0 * period))));
  return m;
}

std::vector<uint8_t> jpeg_bytes(const cv::Mat& m) {
  std::vector<uint8_t> out;
  cv::imencode(".jpg", m, out, {cv::IMWRITE_JPEG_QUALITY, 100});
  return out;
}

double psnr_interior(const cv::Mat& a, const cv::Mat& b) {
  const cv::Rect inner(2, 2, a.cols - 4, a.rows - 4);
  return cv::PSNR(a(inner), b(inner));
}

// The output as convert makes it: the decoded region shrunk with the filter the decode names.
cv::Mat via_region(const std::vector<uint8_t>& jpg, int w, int h, const Geometry& g,
                   ShrinkFilter* filter = nullptr) {
  const RegionDecode rd = decode_jpeg_region(jpg, w, h, g);
  REQUIRE_FALSE(rd.pixels.empty());
  if (filter) *filter = rd.filter;
  if (rd.filter == ShrinkFilter::Cubic)
    return area_resample(rd.pixels, rd.m, g.out_width, g.out_height, 0, rd.filter);
  return warp_image(rd.pixels, rd.m, g.out_width, g.out_height, 0);
}

// TurboJPEG's encoder at quality 90 with the given chroma subsampling (OpenCV 4.6 has no flag).
std::vector<uint8_t> tj_jpeg(const cv::Mat& m, int sampling) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int format = m.channels() == 1 ? TJPF_GRAY : TJPF_BGR;
  REQUIRE(tjCompress2(tj, m.data, m.cols, 0, m.rows, format, &buf, &size, sampling, 90, 0) == 0);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

}  // namespace

TEST_CASE("jpeg region decode matches the full-decode path for crops at every DCT scale") {
  const cv::Mat src = smooth_image(1280, 720);
  const auto jpg = jpeg_bytes(src);
  const cv::Mat full = decode_image(jpg, 1ull << 28);
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.resize = ResizeMode::Exact;
  // Scales (the larger axis's) of about 0.75 and 0.37 (no DCT scaling), 0.29 (1/2), 0.14 (1/4)
  // and 0.07 (1/8): the same filter on the full decode is the reference.
  const struct {
    Region box;
    int size;
    bool cubic;
  } cases[] = {{{400.5, 200.25, 700.5, 500.25}, 224, false},
               {{100.3, 50.7, 700.3, 650.7}, 224, false},
               {{100.3, 10.7, 900.3, 710.7}, 200, true},
               {{13, 7, 1013, 707}, 100, true},
               {{13, 7, 1013, 707}, 50, true}};
  for (const auto& c : cases) {
    o.box = c.box;
    o.width = o.height = c.size;
    const Geometry g = compute_geometry(o, 1280, 720, std::nullopt);
    ShrinkFilter filter{};
    const cv::Mat got = via_region(jpg, 1280, 720, g, &filter);
    const cv::Mat expect = area_resample(full, g.m, g.out_width, g.out_height, 0, filter);
    INFO("box " << c.box.x0 << "," << c.box.y0 << " scale " << g.m[0]);
    CHECK((filter == ShrinkFilter::Cubic) == c.cubic);
    CHECK(psnr_interior(expect, got) > 38);
  }
}

TEST_CASE("jpeg region decode: a half-pixel error in the affine would be visible") {
  // Guards the test above: with detailed content, half a source pixel of misalignment costs
  // far more PSNR than the decode path does.
  const cv::Mat src = smooth_image(640, 480, 0.15);
  const auto jpg = jpeg_bytes(src);
  const cv::Mat full = decode_image(jpg, 1ull << 28);
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.box = {100, 100, 400, 400};
  o.resize = ResizeMode::Exact;
  o.width = o.height = 300;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  Affine shifted = g.m;
  shifted[2] += 0.5 * g.m[0];
  const cv::Mat got = via_region(jpg, 640, 480, g);
  const double aligned = psnr_interior(warp_image(full, g.m, 300, 300, 0), got);
  const double misaligned = psnr_interior(warp_image(full, shifted, 300, 300, 0), got);
  CHECK(aligned > 45);
  CHECK(misaligned < aligned - 10);
}

TEST_CASE("jpeg region decode refuses a truncated file even when the crop is near the top") {
  const auto jpg = jpeg_bytes(smooth_image(640, 480));
  const std::vector<uint8_t> half(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 2));
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.box = {0, 0, 100, 50};
  o.resize = ResizeMode::None;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK_THROWS_AS(decode_jpeg_region(half, 640, 480, g), ParseError);
  CHECK_THROWS_AS(validate_jpeg(half), ParseError);
  CHECK_NOTHROW(validate_jpeg(jpg));
}

TEST_CASE("jpeg region decode of a crop wholly outside the image gives no pixels") {
  const auto jpg = jpeg_bytes(smooth_image(320, 240));
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.box = {1000, 1000, 1100, 1100};
  o.resize = ResizeMode::Exact;
  o.width = o.height = 32;
  const Geometry g = compute_geometry(o, 320, 240, std::nullopt);
  CHECK(decode_jpeg_region(jpg, 320, 240, g).pixels.empty());
}

TEST_CASE("jpeg region decode with the whole image: the same output, the whole at its scale") {
  // --dedup hashes the whole image from the decode the output comes from: the output must be
  // the region decode's, byte for byte, for 4:2:0, 4:4:4 and grey JPEGs (libjpeg widens a
  // region's columns to whole iMCUs: 16, 8 and 8 pixels), and the whole image OpenCV's decode
  // at the same DCT scale.
  cv::Mat colour = smooth_image(1000, 600, 0.3), grey;
  cv::cvtColor(colour, grey, cv::COLOR_BGR2GRAY);
  const struct {
    cv::Mat image;
    int sampling;
  } sources[] = {{colour, TJSAMP_420}, {colour, TJSAMP_444}, {grey, TJSAMP_GRAY}};
  const struct {
    Region box;
    int size;
  } cases[] = {{{403.5, 201.25, 611.5, 409.25}, 224},  // scale 1, inside the image
               {{0, 0, 300, 300}, 96},                 // 1/2, at the top-left corner
               {{517, 213, 977, 593}, 60},             // 1/4, inside
               {{-100, -100, 1100, 700}, 64},          // 1/8, more than the whole image
               {{2000, 2000, 2100, 2100}, 32}};        // outside the image: no pixels
  for (const auto& src : sources) {
    const std::vector<uint8_t> jpg = tj_jpeg(src.image, src.sampling);
    for (const auto& c : cases) {
      GeometryOptions o;
      o.crop = CropMode::Box;
      o.box = c.box;
      o.resize = ResizeMode::Exact;
      o.width = o.height = c.size;
      const Geometry g = compute_geometry(o, 1000, 600, std::nullopt);
      INFO("sampling " << src.sampling << " box " << c.box.x0 << "," << c.box.y0 << " size "
                       << c.size);
      const RegionDecode alone = decode_jpeg_region(jpg, 1000, 600, g);
      cv::Mat whole;
      std::vector<uint8_t> scratch;
      const RegionDecode shared =
          decode_jpeg_region(jpg, 1000, 600, g, ResampleMode::Area, &scratch, &whole);
      CHECK(shared.denom == alone.denom);
      CHECK(shared.denom == region_dct_denom(g, ResampleMode::Area));
      CHECK(shared.m == alone.m);
      CHECK(shared.filter == alone.filter);
      REQUIRE(shared.pixels.size() == alone.pixels.size());
      const int flag = shared.denom == 1   ? cv::IMREAD_COLOR
                       : shared.denom == 2 ? cv::IMREAD_REDUCED_COLOR_2
                       : shared.denom == 4 ? cv::IMREAD_REDUCED_COLOR_4
                                           : cv::IMREAD_REDUCED_COLOR_8;
      const cv::Mat expect = cv::imdecode(jpg, flag);
      REQUIRE(whole.size() == expect.size());
      CHECK(cv::norm(whole, expect, cv::NORM_INF) == 0);
      auto output = [&](const RegionDecode& rd) {
        if (rd.filter == ShrinkFilter::Cubic)
          return area_resample(rd.pixels, rd.m, g.out_width, g.out_height, 0, rd.filter);
        return warp_image(rd.pixels, rd.m, g.out_width, g.out_height, 0);
      };
      if (alone.pixels.empty()) continue;
      CHECK(cv::norm(output(shared), output(alone), cv::NORM_INF) == 0);
    }
  }
}

// OpenCV's own scaled decode (IMREAD_REDUCED_*: libjpeg's scale_denom) is the oracle.
TEST_CASE("decode_jpeg_scaled gives the rows and columns of OpenCV's decode at that scale") {
  cv::Mat src = smooth_image(333, 250, 0.3);  // sizes not multiples of 8 or 16
  cv::RNG(5).fill(src, cv::RNG::NORMAL, 128, 40);
  src += smooth_image(333, 250, 0.3) / 2;
  std::vector<uint8_t> jpg;
  cv::imencode(".jpg", src, jpg, {cv::IMWRITE_JPEG_QUALITY, 90});
  const int modes[] = {cv::IMREAD_COLOR, cv::IMREAD_REDUCED_COLOR_2, cv::IMREAD_REDUCED_COLOR_4,
                       cv::IMREAD_REDUCED_COLOR_8};
  std::vector<uint8_t> scratch;
  for (int k = 0; k < 4; ++k) {
    const int denom = 1 << k;
    const cv::Mat want = cv::imdecode(jpg, modes[k]);
    REQUIRE(want.cols == (333 + denom - 1) / denom);
    REQUIRE(want.rows == (250 + denom - 1) / denom);
    for (const cv::Rect rect : {cv::Rect(0, 0, want.cols, want.rows), cv::Rect(9, 5, 11, 7),
                                cv::Rect(want.cols - 3, want.rows - 2, 10, 10)}) {
      const ScaledRegion r = decode_jpeg_scaled(jpg, 333, 250, denom, rect, JpegPixels::Bgr);
      const cv::Rect asked = rect & cv::Rect(0, 0, want.cols, want.rows);
      CHECK(r.denom == denom);
      CHECK(r.x0 <= asked.x);  // libjpeg may start at an iMCU boundary
      CHECK(r.y0 == asked.y);
      CHECK(r.x0 + r.pixels.cols >= asked.x + asked.width);
      CHECK(r.pixels.rows == asked.height);
      const cv::Mat same = want(cv::Rect(r.x0, r.y0, r.pixels.cols, r.pixels.rows));
      // Exact but for a first or last column inside the image: libjpeg's fancy chroma
      // upsampling has no neighbour there (measured: up to 10 levels off, one column a side).
      const int c0 = r.x0 > 0 ? 1 : 0;
      const int c1 = r.x0 + r.pixels.cols < want.cols ? r.pixels.cols - 1 : r.pixels.cols;
      INFO("denom " << denom << " rect " << rect << " from column " << r.x0);
      CHECK(cv::norm(r.pixels.colRange(c0, c1), same.colRange(c0, c1), cv::NORM_INF) == 0);
      CHECK(cv::norm(r.pixels, same, cv::NORM_INF) <= 16);
      // RGB is the same pixels swapped; the scratch buffer gives the same pixels.
      const ScaledRegion rgb =
          decode_jpeg_scaled(jpg, 333, 250, denom, rect, JpegPixels::Rgb, &scratch);
      cv::Mat bgr;
      cv::cvtColor(rgb.pixels, bgr, cv::COLOR_RGB2BGR);
      CHECK(cv::norm(bgr, r.pixels, cv::NORM_INF) == 0);
      CHECK(rgb.pixels.data == scratch.data());
    }
    // to_full: scaled pixel p is centred at denom * p + (denom - 1) / 2 of the full image.
    const ScaledRegion r =
        decode_jpeg_scaled(jpg, 333, 250, denom, cv::Rect(16, 8, 4, 4), JpegPixels::Bgr);
    const Affine m = r.to_full();
    CHECK(m[0] == denom);
    CHECK(m[2] == denom * r.x0 + (denom - 1) / 2.0);
    CHECK(m[5] == denom * 8 + (denom - 1) / 2.0);
  }
  // A grey JPEG decoded grey: OpenCV's IMREAD_GRAYSCALE.
  cv::Mat grey;
  cv::cvtColor(src, grey, cv::COLOR_BGR2GRAY);
  std::vector<uint8_t> gjpg;
  cv::imencode(".jpg", grey, gjpg, {cv::IMWRITE_JPEG_QUALITY, 90});
  const ScaledRegion g =
      decode_jpeg_scaled(gjpg, 333, 250, 1, cv::Rect(0, 0, 333, 250), JpegPixels::Grey);
  REQUIRE(g.pixels.type() == CV_8UC1);
  CHECK(cv::norm(g.pixels, cv::imdecode(gjpg, cv::IMREAD_GRAYSCALE), cv::NORM_INF) == 0);
  // Nothing asked inside the image: no pixels, nothing decoded.
  CHECK(
      decode_jpeg_scaled(jpg, 333, 250, 2, cv::Rect(400, 0, 5, 5), JpegPixels::Bgr).pixels.empty());
}

TEST_CASE("decode_jpeg_scaled refuses a size that is not the header's, a bad scale, truncation") {
  std::vector<uint8_t> jpg;
  cv::imencode(".jpg", smooth_image(64, 48), jpg, {cv::IMWRITE_JPEG_QUALITY, 90});
  const cv::Rect all(0, 0, 64, 48);
  CHECK_THROWS_WITH(decode_jpeg_scaled(jpg, 65, 48, 1, all, JpegPixels::Rgb),
                    Catch::Contains("64x48, expected 65x48"));
  CHECK_THROWS_AS(decode_jpeg_scaled(jpg, 64, 48, 3, all, JpegPixels::Rgb), ArgumentError);
  std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() * 2 / 3));
  CHECK_THROWS_AS(decode_jpeg_scaled(cut, 64, 48, 1, all, JpegPixels::Rgb), ParseError);
}
