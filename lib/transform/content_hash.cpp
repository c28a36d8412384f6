#include "transform/content_hash.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace tarmac {
namespace {

constexpr int kSide = 32;  // the grey image the DCT is taken of
constexpr int kLow = 8;    // the lowest frequencies kept, per axis

// Rows 0..7 of the orthonormal DCT-II matrix of size 32: C[k][n] = a_k cos(pi (2n + 1) k / 64).
const std::array<std::array<double, kSide>, kLow>& dct_rows() {
  static const auto rows = [] {
    std::array<std::array<double, kSide>, kLow> c{};
    for (int k = 0; k < kLow; ++k) {
      const double a = std::sqrt((k == 0 ? 1.0 : 2.0) / kSide);
      for (int n = 0; n < kSide; ++n)
        c[k][n] = a * std::cos(std::numbers::pi * (2 * n + 1) * k / (2.0 * kSide));
    }
    return c;
  }();
  return rows;
}

}  // namespace

PixelDigest pixel_digest(const cv::Mat& pixels) {
  if (pixels.depth() != CV_8U) throw std::invalid_argument("pixel_digest: 8-bit pixels only");
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw std::bad_alloc();
  XXH3_128bits_reset(state);
  // Little-endian u32 width, height, channels: two images of the same bytes in another shape
  // differ.
  const uint32_t shape[3] = {static_cast<uint32_t>(pixels.cols), static_cast<uint32_t>(pixels.rows),
                             static_cast<uint32_t>(pixels.channels())};
  XXH3_128bits_update(state, shape, sizeof shape);
  const size_t row = static_cast<size_t>(pixels.cols) * pixels.elemSize();
  for (int y = 0; y < pixels.rows; ++y) XXH3_128bits_update(state, pixels.ptr(y), row);
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.low64, h.high64};
}

uint64_t perceptual_hash(const cv::Mat& bgr) {
  if (bgr.depth() != CV_8U || (bgr.channels() != 3 && bgr.channels() != 1))
    throw std::invalid_argument("perceptual_hash: 8-bit BGR or grey pixels only");
  cv::Mat grey = bgr;
  if (bgr.channels() == 3) cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::Mat grey_f, small;
  grey.convertTo(grey_f, CV_32F);
  cv::resize(grey_f, small, cv::Size(kSide, kSide), 0, 0, cv::INTER_AREA);
  const auto& c = dct_rows();
  // low = C8 * X * C8^T, in double: first T = C8 * X (8 x 32), then T * C8^T (8 x 8).
  double t[kLow][kSide] = {};
  for (int k = 0; k < kLow; ++k)
    for (int y = 0; y < kSide; ++y) {
      const float* row = small.ptr<float>(y);
      const double ck = c[k][y];
      for (int x = 0; x < kSide; ++x) t[k][x] += ck * row[x];
    }
  std::array<double, kLow * kLow> low{};
  for (int k = 0; k < kLow; ++k)
    for (int l = 0; l < kLow; ++l) {
      double s = 0;
      for (int x = 0; x < kSide; ++x) s += t[k][x] * c[l][x];
      low[static_cast<size_t>(k * kLow + l)] = s;
    }
  std::array<double, kLow* kLow> sorted = low;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[31] + sorted[32]) / 2;
  uint64_t h = 0;
  for (size_t i = 0; i < low.size(); ++i)
    if (low[i] > median) h |= uint64_t{1} << i;
  return h;
}

ContentHash content_hash(const cv::Mat& bgr) {
  return {pixel_digest(bgr), perceptual_hash(bgr)};
}

}  // namespace tarmac
