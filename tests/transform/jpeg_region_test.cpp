#include <catch2/catch.hpp>
#include <cmath>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "common/error.h"
#include "transform/image_codec.h"
#include "transform/jpeg_region.h"
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

cv::Mat via_region(const std::vector<uint8_t>& jpg, int w, int h, const Geometry& g) {
  const RegionDecode rd = decode_jpeg_region(jpg, w, h, g);
  REQUIRE_FALSE(rd.pixels.empty());
  return warp_image(rd.pixels, rd.m, g.out_width, g.out_height, 0);
}

}  // namespace

TEST_CASE("jpeg region decode matches the full-decode path for crops at every DCT scale") {
  const cv::Mat src = smooth_image(1280, 720);
  const auto jpg = jpeg_bytes(src);
  const cv::Mat full = decode_image(jpg, 1ull << 28);
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.resize = ResizeMode::Exact;
  // Boxes giving scales of about 0.75 (no DCT scaling), 0.37 (1/2), 0.11 (1/8).
  for (const Region box : {Region{400.5, 200.25, 700.5, 500.25}, Region{100.3, 50.7, 700.3, 650.7},
                           Region{13, 7, 1013, 707}}) {
    o.box = box;
    o.width = o.height = 224;
    const Geometry g = compute_geometry(o, 1280, 720, std::nullopt);
    const cv::Mat expect = warp_image(full, g.m, g.out_width, g.out_height, 0);
    const cv::Mat got = via_region(jpg, 1280, 720, g);
    INFO("box " << box.x0 << "," << box.y0 << " scale " << g.m[0]);
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
