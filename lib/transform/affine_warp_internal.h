#pragma once
// warp_affine_linear with its kernel named, so that tests compare each kernel this CPU runs with
// cv::warpAffine (the library itself always takes the fastest).
#include "transform/affine_warp.h"

namespace tarmac::detail {

enum class WarpKernel { Auto, Avx512, Avx2, OpenCV };

/// Whether this CPU runs `kernel` (Auto and OpenCV: always).
bool warp_kernel_supported(WarpKernel kernel);

/// warp_affine_linear by `kernel`; one the CPU lacks, or a source it does not take (not 8-bit
/// RGB, under 3x2 or 32767 pixels a side or more), is handed to OpenCV.
void warp_affine_linear(const cv::Mat& src, cv::Mat& dst, const Affine& m, cv::Size size,
                        double fill, WarpKernel kernel);

}  // namespace tarmac::detail
