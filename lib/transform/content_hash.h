#pragma once
// What `convert --dedup` compares images by (docs/format.md 1.5): a digest of the decoded
// pixels, equal exactly when two images decode to the same pixels whatever their file format,
// and a 64-bit perceptual hash (pHash), close in Hamming distance when two images look alike
// (re-encoded, resized).
#include <array>
#include <bit>
#include <cstdint>
#include <opencv2/core.hpp>

namespace tarmac {

/// XXH3-128 of the pixels, in the order format.md gives (width, height, channels, then rows).
using PixelDigest = std::array<uint64_t, 2>;

struct ContentHash {
  PixelDigest digest{};
  uint64_t phash = 0;
};

/// The digest of `pixels` (8-bit, any channel count; decode_image's BGR as the converter uses).
PixelDigest pixel_digest(const cv::Mat& pixels);

/// The pHash of `bgr` (8-bit, 3 channels BGR or 1 channel grey): the grey means of a 32x32
/// grid of cells, their orthonormal DCT-II, its 8x8 lowest frequencies against their median
/// (format.md 1.5).
uint64_t perceptual_hash(const cv::Mat& bgr);

/// Both hashes of decoded pixels.
ContentHash content_hash(const cv::Mat& bgr);

inline int hamming_distance(uint64_t a, uint64_t b) {
  return std::popcount(a ^ b);
}

}  // namespace tarmac
