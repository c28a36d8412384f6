#pragma once
// Resampling of pixels under an axis-aligned affine map (scale + translation).
#include <cstdint>
#include <span>
#include <vector>

#include <opencv2/core.hpp>

#include "transform/geometry.h"

namespace tarmac {

/// out(p) = src(M^-1 p). When M shrinks an axis (an axis-aligned M, 8-bit or float pixels),
/// each output pixel is the area average of its footprint in the source (resample.h), so that
/// no scale aliases; otherwise bilinear. Pixels outside the source take `pad`.
cv::Mat warp_image(const cv::Mat& src, const Affine& m, int out_w, int out_h, double pad);

/// The source pixels that warp_image or warp_dense of `m` into out_w x out_h may read (with a
/// margin for the area reduction and the interpolation taps), clipped to src_w x src_h; empty
/// when the output lies wholly outside the source. Whole source for a map that is not a
/// positive axis-aligned scale.
cv::Rect warp_source_rect(const Affine& m, int out_w, int out_h, int src_w, int src_h);

/// Nearest-neighbour warp that never mixes values (dense maps: depth, masks); keeps the
/// element type. Outside the source: 0.
cv::Mat warp_dense(const cv::Mat& src, const Affine& m, int out_w, int out_h);

/// Nearest-neighbour warp of pixels of any type, value-exact: each output pixel is a copy of
/// `pixel_bytes` bytes of one source pixel, never converted (NaN payloads, 64-bit integers,
/// f16 and bool survive), at the positions cv::warpAffine with INTER_NEAREST samples; outside
/// the source: zero bytes. `src` holds rows x cols pixels in C order; rows x cols < 2^31.
std::vector<uint8_t> warp_dense_bytes(std::span<const uint8_t> src, int cols, int rows,
                                      size_t pixel_bytes, const Affine& m, int out_w, int out_h);

/// The map from a dense map's pixel coordinates to its image's, when their sizes differ.
Affine dense_to_image(int dense_w, int dense_h, int image_w, int image_h);

/// a * b (apply b first).
Affine compose(const Affine& a, const Affine& b);

}  // namespace tarmac
