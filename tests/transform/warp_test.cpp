#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <set>

#include "transform/geometry.h"
#include "transform/warp.h"

using tarmac::Affine;
using tarmac::warp_dense;
using tarmac::warp_image;

namespace {

// A smooth, non-linear test image (so that box averages differ from point samples).
cv::Mat smooth_float(int w, int h) {
  cv::Mat m(h, w, CV_32FC1);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      m.at<float>(y, x) = static_cast<float>(100 + 40 * std::sin(x * 0.21) + 0.05 * y * y + x);
  return m;
}

// The exact k x k box average of `src` for output pixel (x, y).
double box_average(const cv::Mat& src, int x, int y, int k) {
  double sum = 0;
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx) sum += src.at<float>(y * k + dy, x * k + dx);
  return sum / (k * k);
}

// Bilinear sample at (u, v) in pixel-centre coordinates; outside pixels read `pad`.
double bilinear(const cv::Mat& src, double u, double v, double pad) {
  const int x0 = static_cast<int>(std::floor(u)), y0 = static_cast<int>(std::floor(v));
  const double fx = u - x0, fy = v - y0;
  auto at = [&](int x, int y) -> double {
    if (x < 0 || y < 0 || x >= src.cols || y >= src.rows) return pad;
    return src.at<float>(y, x);
  };
  return (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x0 + 1, y0)) +
         fy * ((1 - fx) * at(x0, y0 + 1) + fx * at(x0 + 1, y0 + 1));
}

// The map that scales a whole image by 1/k: output = (u + 0.5) / k - 0.5.
Affine shrink(int k) {
  return {1.0 / k, 0, 0.5 / k - 0.5, 0, 1.0 / k, 0.5 / k - 0.5};
}

}  // namespace

TEST_CASE("warp_image: an integer downscale is the exact box average") {
  const cv::Mat src = smooth_float(96, 72);
  for (int k : {2, 3, 4}) {
    INFO("factor " << k);
    const cv::Mat out = warp_image(src, shrink(k), 96 / k, 72 / k, 0);
    REQUIRE(out.type() == CV_32FC1);
    REQUIRE(out.cols == 96 / k);
    REQUIRE(out.rows == 72 / k);
    double worst = 0;
    for (int y = 0; y < out.rows; ++y)
      for (int x = 0; x < out.cols; ++x)
        worst = std::max(worst, std::abs(out.at<float>(y, x) - box_average(src, x, y, k)));
    CHECK(worst < 1e-3);
  }
}

TEST_CASE("warp_image: an 8-bit 2x downscale rounds the box average") {
  cv::Mat src(40, 60, CV_8UC3);
  for (int y = 0; y < src.rows; ++y)
    for (int x = 0; x < src.cols; ++x)
      src.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uint8_t>((x * x) % 256), static_cast<uint8_t>(3 * y + x),
                    static_cast<uint8_t>((x * 7 + y * 13) % 256));
  const cv::Mat out = warp_image(src, shrink(2), 30, 20, 0);
  REQUIRE(out.type() == CV_8UC3);
  int worst = 0;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 30; ++x)
      for (int c = 0; c < 3; ++c) {
        const double avg =
            (src.at<cv::Vec3b>(2 * y, 2 * x)[c] + src.at<cv::Vec3b>(2 * y, 2 * x + 1)[c] +
             src.at<cv::Vec3b>(2 * y + 1, 2 * x)[c] + src.at<cv::Vec3b>(2 * y + 1, 2 * x + 1)[c]) /
            4.0;
        worst = std::max(worst,
                         static_cast<int>(std::ceil(std::abs(out.at<cv::Vec3b>(y, x)[c] - avg))));
      }
  CHECK(worst <= 1);
}

// Regression: the reduction's blocks once started off the crop's first pixel, so a 2x centre
// crop averaged 4 columns instead of 2 (64x48 -> centre 24x24: strip at column 3, output
// pixels over 8-9, 10-11, ...).
TEST_CASE("warp_image: a 2x downscale after an odd centre crop is still a 2x2 box average") {
  cv::Mat src(48, 64, CV_32FC1);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) src.at<float>(y, x) = ((x / 2) % 2) ? 255.f : 0.f;
  tarmac::GeometryOptions o;
  o.crop = tarmac::CropMode::Center;
  o.resize = tarmac::ResizeMode::Exact;
  o.width = o.height = 24;
  const auto g = tarmac::compute_geometry(o, 64, 48, std::nullopt);
  REQUIRE(g.m[0] == Approx(0.5));
  const cv::Mat out = warp_image(src, g.m, 24, 24, 0);
  // Output column X covers source columns 8 + 2X and 9 + 2X.
  for (int x = 1; x < 23; ++x) {
    INFO("column " << x);
    CHECK(out.at<float>(12, x) == Approx(((4 + x) % 2) ? 255.0 : 0.0).margin(1));
  }
}

TEST_CASE("warp_image: a fractional shrink of a whole image is cv::resize's INTER_AREA") {
  cv::RNG rng(3);
  cv::Mat src(97, 131, CV_8UC3);
  rng.fill(src, cv::RNG::UNIFORM, 0, 256);
  for (const auto& [w, h] : {std::pair{100, 80}, std::pair{43, 29}, std::pair{13, 11},
                             std::pair{130, 50}, std::pair{66, 97}}) {
    CAPTURE(w, h);
    const double sx = double(w) / src.cols, sy = double(h) / src.rows;
    const Affine m{sx, 0, 0.5 * sx - 0.5, 0, sy, 0.5 * sy - 0.5};
    cv::Mat want;
    cv::resize(src, want, cv::Size(w, h), 0, 0, cv::INTER_AREA);
    CHECK(cv::norm(warp_image(src, m, w, h, 0), want, cv::NORM_INF) <= 1);
  }
}

TEST_CASE("warp_image: shrinking one axis and enlarging the other") {
  // x shrinks by 3 (each output pixel the mean of 3 columns), y doubles (bilinear).
  const cv::Mat src = smooth_float(30, 10);
  const Affine m{1.0 / 3, 0, 1.0 / 6 - 0.5, 0, 2, 0.5};
  const cv::Mat out = warp_image(src, m, 10, 20, 5);
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 10; ++x) {
      const double v = (y - 0.5) / 2;  // source row, pixel-centre coordinates
      double want = 0;
      for (int k = 0; k < 3; ++k) {
        cv::Mat column = src.col(3 * x + k).clone();
        want += bilinear(column, 0, v, 5) / 3;
      }
      INFO("x=" << x << " y=" << y);
      CHECK(out.at<float>(y, x) == Approx(want).margin(1e-3));
    }
}

TEST_CASE("warp_image: an empty source gives the pad") {
  const cv::Mat empty(0, 0, CV_8UC3);
  const cv::Mat out = warp_image(empty, Affine{0.5, 0, 0, 0, 0.5, 0}, 4, 3, 9);
  REQUIRE(out.size() == cv::Size(4, 3));
  CHECK(cv::countNonZero(out.reshape(1) != 9) == 0);
}

TEST_CASE("warp_image: an integer translation is a shifted copy, padded outside") {
  const cv::Mat src = smooth_float(30, 20);
  const Affine m{1, 0, 5, 0, 1, -3};  // output (x, y) = source (x - 5, y + 3)
  const cv::Mat out = warp_image(src, m, 30, 20, 77);
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 30; ++x) {
      const int sx = x - 5, sy = y + 3;
      const double want = (sx >= 0 && sy < 20) ? src.at<float>(sy, sx) : 77.0;
      INFO("x=" << x << " y=" << y);
      CHECK(out.at<float>(y, x) == Approx(want).margin(1e-4));
    }
}

TEST_CASE("warp_image: a 2x upscale is bilinear, blending the pad at the border") {
  const cv::Mat src = smooth_float(16, 12);
  const Affine m{2, 0, 0.5, 0, 2, 0.5};  // output = (u + 0.5) * 2 - 0.5
  const cv::Mat out = warp_image(src, m, 32, 24, 10);
  struct P {
    int x, y;
  };
  for (P p : {P{0, 0}, P{1, 1}, P{5, 7}, P{10, 3}, P{31, 23}, P{31, 0}, P{16, 12}, P{2, 22}}) {
    const double u = (p.x - 0.5) / 2, v = (p.y - 0.5) / 2;
    INFO("x=" << p.x << " y=" << p.y);
    CHECK(out.at<float>(p.y, p.x) == Approx(bilinear(src, u, v, 10)).margin(1e-3));
  }
}

TEST_CASE("warp_image: a 1.5x upscale matches bilinear sampling to within 1/32 pixel") {
  const cv::Mat src = smooth_float(20, 20);
  const Affine m{1.5, 0, 0.25, 0, 1.5, 0.25};
  const cv::Mat out = warp_image(src, m, 30, 30, 0);
  for (int y = 2; y < 28; y += 5)
    for (int x = 2; x < 28; x += 3) {
      const double u = (x - 0.25) / 1.5, v = (y - 0.25) / 1.5;
      // OpenCV quantises sample positions to 1/32 pixel; the image's slope is below 50 a pixel.
      CHECK(out.at<float>(y, x) == Approx(bilinear(src, u, v, 0)).margin(50.0 / 32));
    }
}

TEST_CASE("warp_image: an output wholly outside the source is all pad") {
  const cv::Mat src = smooth_float(64, 64);
  for (double scale : {0.5, 1.0, 2.0}) {
    const Affine m{scale, 0, 1000, 0, scale, 1000};
    const cv::Mat out = warp_image(src, m, 8, 6, 42);
    REQUIRE(out.type() == src.type());
    REQUIRE(out.cols == 8);
    REQUIRE(out.rows == 6);
    CHECK(cv::countNonZero(out != 42) == 0);
  }
  // ... also when the source lies to the right of the output.
  const Affine left{0.25, 0, -1000, 0, 0.25, 0};
  const cv::Mat out = warp_image(src, left, 8, 6, 42);
  CHECK(cv::countNonZero(out != 42) == 0);
}

TEST_CASE("warp_dense: 16-bit values are never mixed") {
  cv::Mat src(37, 53, CV_16UC1);
  std::set<uint16_t> values{0};
  for (int y = 0; y < src.rows; ++y)
    for (int x = 0; x < src.cols; ++x) {
      const auto v = static_cast<uint16_t>(1000 + 977 * x + 31 * y);
      src.at<uint16_t>(y, x) = v;
      values.insert(v);
    }
  for (const Affine& m : {Affine{0.37, 0, 1.3, 0, 0.41, -2.2}, Affine{2.6, 0, 0.8, 0, 2.6, 0.8},
                          Affine{1, 0, 3.5, 0, 1, -1.25}, Affine{0.5, 0, -0.25, 0, 0.5, -0.25}}) {
    const cv::Mat out = warp_dense(src, m, 70, 50);
    REQUIRE(out.type() == CV_16UC1);
    REQUIRE(out.cols == 70);
    REQUIRE(out.rows == 50);
    for (int y = 0; y < out.rows; ++y)
      for (int x = 0; x < out.cols; ++x) CHECK(values.count(out.at<uint16_t>(y, x)) == 1);
  }
}

TEST_CASE("warp_dense: nearest neighbour, zero outside") {
  cv::Mat src(4, 5, CV_16UC1);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x) src.at<uint16_t>(y, x) = static_cast<uint16_t>(60000 + 10 * y + x);

  // 2x upscale: output column X samples source (X - 0.5) / 2, nearest = X / 2.
  const cv::Mat up = warp_dense(src, Affine{2, 0, 0.5, 0, 2, 0.5}, 10, 8);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 10; ++x) CHECK(up.at<uint16_t>(y, x) == src.at<uint16_t>(y / 2, x / 2));

  // Translation by (2, 1): a shifted copy with zeros where the source is absent.
  const cv::Mat moved = warp_dense(src, Affine{1, 0, 2, 0, 1, 1}, 5, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x) {
      const int sx = x - 2, sy = y - 1;
      CHECK(moved.at<uint16_t>(y, x) == (sx >= 0 && sy >= 0 ? src.at<uint16_t>(sy, sx) : 0));
    }
}

TEST_CASE("dense_to_image maps pixel edges to pixel edges") {
  const Affine d = tarmac::dense_to_image(320, 240, 640, 480);
  double x, y;
  tarmac::apply_affine(d, -0.5, -0.5, x, y);
  CHECK(x == Approx(-0.5));
  CHECK(y == Approx(-0.5));
  tarmac::apply_affine(d, 319.5, 239.5, x, y);
  CHECK(x == Approx(639.5));
  CHECK(y == Approx(479.5));
  tarmac::apply_affine(d, 0, 0, x, y);  // dense pixel 0 covers image pixels 0 and 1
  CHECK(x == Approx(0.5));
  CHECK(y == Approx(0.5));

  const Affine same = tarmac::dense_to_image(7, 9, 7, 9);
  const Affine id{1, 0, 0, 0, 1, 0};
  for (int i = 0; i < 6; ++i) CHECK(same[i] == Approx(id[i]).margin(1e-12));

  const Affine odd = tarmac::dense_to_image(3, 4, 10, 5);
  tarmac::apply_affine(odd, 2.5, 3.5, x, y);
  CHECK(x == Approx(9.5));
  CHECK(y == Approx(4.5));
}

TEST_CASE("compose applies the right-hand map first") {
  const Affine a{2, 0.5, 3, -1, 4, 5};
  const Affine b{0.25, -2, 1, 3, 1.5, -7};
  const Affine ab = tarmac::compose(a, b);
  for (auto [px, py] :
       {std::pair{0.0, 0.0}, std::pair{1.0, 0.0}, std::pair{0.0, 1.0}, std::pair{-3.5, 12.25}}) {
    // b first, by hand: b(p) = (0.25 px - 2 py + 1, 3 px + 1.5 py - 7).
    const double bx = 0.25 * px - 2 * py + 1, by = 3 * px + 1.5 * py - 7;
    const double want_x = 2 * bx + 0.5 * by + 3, want_y = -bx + 4 * by + 5;
    double x, y;
    tarmac::apply_affine(ab, px, py, x, y);
    CHECK(x == Approx(want_x));
    CHECK(y == Approx(want_y));
  }
  // Mapping dense -> image -> output equals the composed map.
  tarmac::GeometryOptions o;
  o.crop = tarmac::CropMode::Center;
  o.resize = tarmac::ResizeMode::Exact;
  o.width = o.height = 100;
  const auto g = tarmac::compute_geometry(o, 640, 480, std::nullopt);
  const Affine dense_out = tarmac::compose(g.m, tarmac::dense_to_image(320, 240, 640, 480));
  double x, y;
  tarmac::apply_affine(dense_out, 39.5, -0.5, x, y);  // image (79.5, -0.5): the crop's corner
  CHECK(x == Approx(-0.5));
  CHECK(y == Approx(-0.5));
}

namespace {
cv::Mat cv_affine(const Affine& m) {
  return (cv::Mat_<double>(2, 3) << m[0], m[1], m[2], m[3], m[4], m[5]);
}
}  // namespace

TEST_CASE("warp_dense_bytes takes OpenCV's nearest-neighbour pixels, bytes kept", "[warp]") {
  // float32 with NaN and inf: the result equals cv::warpAffine(INTER_NEAREST) bit for bit.
  const int w = 37, h = 23;
  cv::Mat f(h, w, CV_32FC1);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) f.at<float>(y, x) = static_cast<float>(x * 100 + y) + 0.25f;
  f.at<float>(3, 4) = std::nanf("");
  f.at<float>(10, 30) = INFINITY;
  for (const Affine& m : {Affine{0.6, 0, 1.3, 0, 0.9, -2.2}, Affine{2.5, 0, -7, 0, 1.75, -3},
                          Affine{1, 0, 0, 0, 1, 0}}) {
    const std::vector<uint8_t> got = tarmac::warp_dense_bytes({f.data, f.total() * f.elemSize()}, w,
                                                              h, sizeof(float), m, 31, 29);
    cv::Mat ref;
    cv::warpAffine(f, ref, cv_affine(m), cv::Size(31, 29), cv::INTER_NEAREST, cv::BORDER_CONSTANT,
                   cv::Scalar::all(0));
    REQUIRE(got.size() == ref.total() * ref.elemSize());
    CHECK(std::memcmp(got.data(), ref.data, got.size()) == 0);
  }
}

TEST_CASE("warp_dense_bytes moves 64-bit and multi-channel pixels whole", "[warp]") {
  // u64 values above 2^53 (no double holds them) in 2 channels: the oracle warps the same
  // bytes as int32 x 4 channels, which OpenCV does natively.
  const int w = 9, h = 7, c = 2;
  std::vector<uint64_t> v(size_t(w) * h * c);
  for (size_t k = 0; k < v.size(); ++k) v[k] = (uint64_t{1} << 60) + k * 0x100000001ULL;
  const Affine m{1.7, 0, -1.2, 0, 0.55, 0.8};
  const std::vector<uint8_t> got = tarmac::warp_dense_bytes(
      {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 8}, w, h, 8 * c, m, 12, 5);
  cv::Mat src(h, w, CV_32SC4, v.data()), ref;
  cv::warpAffine(src, ref, cv_affine(m), cv::Size(12, 5), cv::INTER_NEAREST, cv::BORDER_CONSTANT,
                 cv::Scalar::all(0));
  REQUIRE(got.size() == ref.total() * ref.elemSize());
  CHECK(std::memcmp(got.data(), ref.data, got.size()) == 0);
  // Outside the source (the map starts left of it): zero bytes.
  const std::vector<uint8_t> out =
      tarmac::warp_dense_bytes({reinterpret_cast<const uint8_t*>(v.data()), v.size() * 8}, w, h,
                               8 * c, Affine{1, 0, 50, 0, 1, 0}, 4, 4);
  CHECK(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0; }));
}

TEST_CASE("warp_source_rect holds every source pixel the warps read") {
  // Pixels outside the rect set to two different values: the outputs must not change.
  cv::RNG rng(17);
  cv::Mat src(300, 400, CV_8UC3);
  rng.fill(src, cv::RNG::UNIFORM, 0, 256);
  tarmac::GeometryOptions o;
  o.crop = tarmac::CropMode::Box;
  o.resize = tarmac::ResizeMode::Exact;
  for (int k = 0; k < 200; ++k) {
    const double x = rng.uniform(-50.0, 380.0), y = rng.uniform(-50.0, 280.0);
    const double w = rng.uniform(3.0, 390.0), h = rng.uniform(3.0, 290.0);
    o.box = {x, y, x + w, y + h};
    o.width = rng.uniform(8, 300);
    o.height = rng.uniform(8, 300);
    const tarmac::Geometry g = tarmac::compute_geometry(o, src.cols, src.rows, std::nullopt);
    const cv::Rect r = tarmac::warp_source_rect(g.m, g.out_width, g.out_height, src.cols, src.rows);
    CAPTURE(x, y, w, h, o.width, o.height);
    for (int v : {0, 255}) {
      cv::Mat masked(src.size(), src.type(), cv::Scalar::all(v));
      if (!r.empty()) src(r).copyTo(masked(r));
      const cv::Mat a = warp_image(src, g.m, g.out_width, g.out_height, 7);
      const cv::Mat b = warp_image(masked, g.m, g.out_width, g.out_height, 7);
      REQUIRE(cv::norm(a, b, cv::NORM_INF) == 0);
      const cv::Mat c = warp_dense(src, g.m, g.out_width, g.out_height);
      const cv::Mat d = warp_dense(masked, g.m, g.out_width, g.out_height);
      REQUIRE(cv::norm(c, d, cv::NORM_INF) == 0);
    }
  }
}
