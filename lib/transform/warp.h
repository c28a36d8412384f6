#pragma once
// Resampling of pixels under an axis-aligned affine map (scale + translation).
#include <opencv2/core.hpp>

#include "transform/geometry.h"

namespace tarmac {

/// out(p) = src(M^-1 p), bilinear; when M shrinks by 2x or more, the source is first reduced
/// by an integer box filter (exact area average) so that downscaling does not alias.
/// Pixels outside the source take `pad`.
cv::Mat warp_image(const cv::Mat& src, const Affine& m, int out_w, int out_h, double pad);

/// Nearest-neighbour warp that never mixes values (dense maps: depth, masks); keeps the
/// element type. Outside the source: 0.
cv::Mat warp_dense(const cv::Mat& src, const Affine& m, int out_w, int out_h);

/// The map from a dense map's pixel coordinates to its image's, when their sizes differ.
Affine dense_to_image(int dense_w, int dense_h, int image_w, int image_h);

/// a * b (apply b first).
Affine compose(const Affine& a, const Affine& b);

}  // namespace tarmac
