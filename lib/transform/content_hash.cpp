#include "transform/content_hash.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

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

namespace {

// Cell k of kSide along an axis of `size` pixels: [lo, hi), never empty (format.md 1.5).
std::pair<int, int> cell(int k, int size) {
  const int lo = static_cast<int>(int64_t{k} * size / kSide);
  const int hi = static_cast<int>(int64_t{k + 1} * size / kSide);
  return {lo, std::max(hi, lo + 1)};
}

}  // namespace

uint64_t perceptual_hash(const cv::Mat& bgr) {
  if (bgr.depth() != CV_8U || (bgr.channels() != 3 && bgr.channels() != 1) || bgr.empty())
    throw std::invalid_argument("perceptual_hash: 8-bit BGR or grey pixels only");
  // The grey 32x32 image: each cell's mean B, G, R (one pass over the pixels, integer sums),
  // then OpenCV's grey weights on the means. Cheaper than a resize (no weights per pixel), and
  // recomputable with a cumulative sum anywhere.
  const int ch = bgr.channels();
  std::array<std::pair<int, int>, kSide> xs;
  for (int k = 0; k < kSide; ++k) xs[k] = cell(k, bgr.cols);
  cv::Mat small(kSide, kSide, CV_64F);
  for (int i = 0; i < kSide; ++i) {
    const auto [y0, y1] = cell(i, bgr.rows);
    std::array<std::array<uint64_t, 3>, kSide> sums{};
    for (int y = y0; y < y1; ++y) {
      const uint8_t* row = bgr.ptr<uint8_t>(y);
      for (int k = 0; k < kSide; ++k) {
        uint64_t b = 0, g = 0, r = 0;
        if (ch == 3) {
          for (int x = xs[k].first; x < xs[k].second; ++x) {
            b += row[3 * x];
            g += row[3 * x + 1];
            r += row[3 * x + 2];
          }
        } else {
          for (int x = xs[k].first; x < xs[k].second; ++x) b += row[x];
        }
        sums[k][0] += b;
        sums[k][1] += g;
        sums[k][2] += r;
      }
    }
    for (int k = 0; k < kSide; ++k) {
      const auto n = static_cast<double>(int64_t{y1 - y0} * (xs[k].second - xs[k].first));
      const double b = static_cast<double>(sums[k][0]) / n;
      small.at<double>(i, k) = ch == 3
                                   ? 0.299 * (static_cast<double>(sums[k][2]) / n) +
                                         0.587 * (static_cast<double>(sums[k][1]) / n) + 0.114 * b
                                   : b;
    }
  }
  const auto& c = dct_rows();
  // low = C8 * X * C8^T, in double: first T = C8 * X (8 x 32), then T * C8^T (8 x 8).
  double t[kLow][kSide] = {};
  for (int k = 0; k < kLow; ++k)
    for (int y = 0; y < kSide; ++y) {
      const double* row = small.ptr<double>(y);
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
