#include "transform/content_hash.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

#include "common/error.h"

using namespace tarmac;

namespace {

// A smooth, textured colour image (waves and discs over blurred noise), different per seed.
cv::Mat natural(uint32_t seed, int w = 200, int h = 150) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  cv::Mat img(h, w, CV_8UC3);
  double a[3], b[3], c[3];
  for (int k = 0; k < 3; ++k) a[k] = u(rng), b[k] = u(rng), c[k] = u(rng);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k)
        img.at<cv::Vec3b>(y, x)[k] = cv::saturate_cast<uint8_t>(
            128 + 60 * std::sin(a[k] * x / 13 + b[k] * y / 17 + c[k] * 6));
  for (int i = 0; i < 5; ++i)
    cv::circle(img,
               {static_cast<int>((u(rng) + 1) * w / 2), static_cast<int>((u(rng) + 1) * h / 2)},
               static_cast<int>(10 + (u(rng) + 1) * 25),
               cv::Scalar((u(rng) + 1) * 127, (u(rng) + 1) * 127, (u(rng) + 1) * 127), -1);
  cv::Mat noise(h, w, CV_8UC3);
  cv::randn(noise, cv::Scalar::all(0), cv::Scalar::all(20));
  cv::GaussianBlur(noise, noise, {0, 0}, 2);
  return img + noise;
}

// The pHash as format.md 1.5 words it, each cell's mean taken pixel by pixel and the DCT summed
// term by term from its definition (not the library's row sums and separable product).
uint64_t phash_by_definition(const cv::Mat& bgr) {
  double small[32][32];
  for (int i = 0; i < 32; ++i)
    for (int k = 0; k < 32; ++k) {
      const int y0 = i * bgr.rows / 32, y1 = std::max((i + 1) * bgr.rows / 32, y0 + 1);
      const int x0 = k * bgr.cols / 32, x1 = std::max((k + 1) * bgr.cols / 32, x0 + 1);
      int64_t b = 0, g = 0, r = 0;
      for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
          const cv::Vec3b p = bgr.at<cv::Vec3b>(y, x);
          b += p[0], g += p[1], r += p[2];
        }
      const double n = static_cast<double>((y1 - y0) * (x1 - x0));
      small[i][k] = 0.299 * (static_cast<double>(r) / n) + 0.587 * (static_cast<double>(g) / n) +
                    0.114 * (static_cast<double>(b) / n);
    }
  std::vector<double> low;
  for (int u = 0; u < 8; ++u)
    for (int v = 0; v < 8; ++v) {
      double s = 0;
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x)
          s += small[y][x] * std::cos(std::numbers::pi * (2 * y + 1) * u / 64) *
               std::cos(std::numbers::pi * (2 * x + 1) * v / 64);
      const double au = std::sqrt((u == 0 ? 1.0 : 2.0) / 32);
      const double av = std::sqrt((v == 0 ? 1.0 : 2.0) / 32);
      low.push_back(au * av * s);
    }
  std::vector<double> sorted = low;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[31] + sorted[32]) / 2;
  uint64_t h = 0;
  for (size_t i = 0; i < 64; ++i)
    if (low[i] > median) h |= uint64_t{1} << i;
  return h;
}

cv::Mat reencoded(const cv::Mat& img, const std::string& ext, int quality) {
  std::vector<uint8_t> bytes;
  cv::imencode(ext, img, bytes, {cv::IMWRITE_JPEG_QUALITY, quality});
  return cv::imdecode(bytes, cv::IMREAD_COLOR);
}

}  // namespace

TEST_CASE("the pixel digest depends on the pixels and their shape, not on the memory layout") {
  const cv::Mat a = natural(1);
  const cv::Mat big = cv::Mat::zeros(a.rows + 10, a.cols + 10, CV_8UC3);
  a.copyTo(big(cv::Rect(5, 5, a.cols, a.rows)));
  const cv::Mat view = big(cv::Rect(5, 5, a.cols, a.rows));  // not continuous
  REQUIRE_FALSE(view.isContinuous());
  CHECK(pixel_digest(a) == pixel_digest(view));
  cv::Mat b = a.clone();
  b.at<cv::Vec3b>(70, 30)[1] ^= 1;  // one bit of one pixel
  CHECK(pixel_digest(a) != pixel_digest(b));
  // The same bytes as another shape: 150x200x3 vs 300x100x3 vs grey 150x600.
  CHECK(pixel_digest(a) != pixel_digest(a.reshape(3, 300)));
  CHECK(pixel_digest(a) != pixel_digest(a.reshape(1, 150)));
  // Lossless: a PNG round trip keeps the digest.
  CHECK(pixel_digest(a) == pixel_digest(reencoded(a, ".png", 0)));
  CHECK_THROWS_AS(pixel_digest(cv::Mat(4, 4, CV_16UC1)), tarmac::InternalError);
}

TEST_CASE("the perceptual hash is the documented pHash") {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const cv::Mat img =
        natural(seed, 120 + 37 * static_cast<int>(seed), 90 + 11 * static_cast<int>(seed));
    INFO("seed " << seed);
    const uint64_t h = perceptual_hash(img);
    CHECK(h == phash_by_definition(img));
    CHECK(std::popcount(h) == 32);  // above the median of 64 distinct values: half of them
    CHECK(content_hash(img).phash == h);
    CHECK(content_hash(img).digest == pixel_digest(img));
  }
  // Smaller than the grid (cells share pixels), and cells of more than 257 rows (their sums
  // go through u16 runs: content_hash.cpp's add_rows).
  for (const auto& [w, h] : {std::pair{7, 5}, std::pair{21, 9000}}) {
    INFO(w << "x" << h);
    const cv::Mat img = natural(5, w, h);
    CHECK(perceptual_hash(img) == phash_by_definition(img));
  }
  // Grey input: the hash of the grey pixels, as of their 3-channel copy.
  const cv::Mat img = natural(3);
  cv::Mat grey, grey3;
  cv::cvtColor(img, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(grey, grey3, cv::COLOR_GRAY2BGR);
  CHECK(perceptual_hash(grey) == perceptual_hash(grey3));
}

TEST_CASE("re-encoded and resized copies hash near, other images far") {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    INFO("seed " << seed);
    const cv::Mat img = reencoded(natural(seed, 320, 240), ".jpg", 95);
    const uint64_t h = perceptual_hash(img);
    CHECK(hamming_distance(h, perceptual_hash(reencoded(img, ".jpg", 80))) <= 4);
    cv::Mat half;
    cv::resize(img, half, {160, 120}, 0, 0, cv::INTER_AREA);
    CHECK(hamming_distance(h, perceptual_hash(half)) <= 4);
    const cv::Mat crop = img(cv::Rect(64, 48, 192, 144)).clone();  // the central 60 %
    CHECK(hamming_distance(h, perceptual_hash(crop)) > 8);
    CHECK(hamming_distance(h, perceptual_hash(natural(seed + 100, 320, 240))) > 8);
  }
}
