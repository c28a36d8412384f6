#pragma once
// Separable resampling under an axis-aligned scale + translation, exact in geometry: output
// pixel x is centred on source u = (x - t) / s, as cv::warpAffine samples. A shrinking axis
// averages the source over the output pixel's footprint, [(x - 0.5 - t) / s, (x + 0.5 - t) / s],
// each source pixel weighted by the length it overlaps (what cv::resize's INTER_AREA does for
// a whole image, here at any offset, so crops keep their sub-pixel position); an enlarging axis
// interpolates linearly. Pixels outside the source read `pad`.
#include <opencv2/core.hpp>

#include "transform/geometry.h"

namespace tarmac {

/// True when `m` is a positive axis-aligned scale + translation (what area_resample takes).
bool axis_aligned(const Affine& m);

/// `src` (CV_8U or CV_32F, 1 to 4 channels) resampled by the axis-aligned map `m` into
/// out_w x out_h, as described above; the element type is kept (8-bit values rounded to
/// nearest). Throws std::invalid_argument for another map or element type.
cv::Mat area_resample(const cv::Mat& src, const Affine& m, int out_w, int out_h, double pad);

}  // namespace tarmac
