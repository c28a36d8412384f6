#pragma once
// A bilinear affine warp that gives cv::warpAffine's bytes (INTER_LINEAR, BORDER_CONSTANT) in
// about a third of its time for 8-bit RGB: the augmentation's warp of every sample
// (docs/performance.md, "Augmentation in the batch decode").
#include <opencv2/core.hpp>

#include "transform/geometry.h"

namespace tarmac {

/// dst = cv::warpAffine(src, m, size, INTER_LINEAR, BORDER_CONSTANT, fill), byte for byte: the
/// same fixed point (taps at 1/32 pixel, one rounding) and border rule. 8-bit 3-channel sources
/// on a CPU with AVX-512 (F, BW) or AVX2 take a vector path (16 or 8 output pixels at a time);
/// any other type, CPU, or a source under 3x2 or of 32767 pixels a side or more is handed to
/// OpenCV. `dst` is (re)created as size x src.type() unless it already is (a view into a
/// caller's buffer); nothing outside its pixels is written.
void warp_affine_linear(const cv::Mat& src, cv::Mat& dst, const Affine& m, cv::Size size,
                        double fill);

}  // namespace tarmac
