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

/// The filter of a shrinking axis. Area: the footprint's average, as above. Cubic: Keys' cubic
/// (a = -0.5) stretched by 1 / s, as PIL's and torch's antialiased bicubic: it keeps more of
/// the frequencies below the output's Nyquist limit than the box does, which makes up for the
/// low-pass of a DCT-scaled JPEG decode (jpeg_region.h) where an area average adds to it.
enum class ShrinkFilter { Area, Cubic };

/// True when `m` is a positive axis-aligned scale + translation (what area_resample takes).
bool axis_aligned(const Affine& m);

/// `src` (CV_8U or CV_32F, 1 to 4 channels) resampled by the axis-aligned map `m` into
/// out_w x out_h, as described above, shrinking axes with `filter`; the element type is kept
/// (8-bit values rounded to nearest, ties to even, and saturated). An 8-bit area resample of 3
/// or 4 channels is summed in fixed point, within 1/7 of a level of the float sums (resample.cpp
/// says when). Throws InternalError for another map or element type.
cv::Mat area_resample(const cv::Mat& src, const Affine& m, int out_w, int out_h, double pad,
                      ShrinkFilter filter = ShrinkFilter::Area);

}  // namespace tarmac
