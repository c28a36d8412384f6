#pragma once
// Decoding only the part of a JPEG that a crop needs, at a reduced DCT scale where the output
// is small enough for that to cost no quality: rows above the region are skipped
// (their entropy data is read, no IDCT), columns outside are not colour-converted, and
// decoding stops after the region's last row. For a person box in a video frame, or a
// centre crop downscaled 3x or more, this is most of the cost of a full decode saved.
#include <cstdint>
#include <span>
#include <vector>

#include <opencv2/core.hpp>

#include "transform/geometry.h"
#include "transform/resample.h"

namespace tarmac {

struct RegionDecode {
  cv::Mat
      pixels;  ///< BGR, the decoded part of the image (possibly empty when the crop lies outside)
  Affine m{};  ///< maps `pixels` coordinates to output coordinates
  /// How to shrink `pixels` by `m`: Cubic after a DCT-scaled decode (resample.h says why).
  ShrinkFilter filter = ShrinkFilter::Area;
  int denom = 1;  ///< the DCT scale it was decoded at: 1/denom
};

/// The largest shrink (output / source, the larger axis's) that ResampleMode::Area decodes at
/// a reduced DCT scale, and the most it then leaves to the resampler (docs/performance.md).
inline constexpr double kDctScaleMax = 0.3, kDctShrinkMax = 0.6;

/// The DCT scale decode_jpeg_region decodes the output of `g` at: 1/denom, denom 1, 2, 4 or 8.
int region_dct_denom(const Geometry& g, ResampleMode mode);

/// Decodes what the output of `g` needs from a JPEG of size w x h (stored orientation 1, not
/// CMYK). Throws ParseError for a corrupt stream or one without its end-of-image marker.
/// Corruption in rows after the region is not seen (they are not decoded). With
/// ResampleMode::Area a shrink to kDctScaleMax or less is decoded at a reduced DCT scale (and
/// `filter` says Cubic); ResampleMode::AreaExact always decodes at full resolution. With
/// `scratch` the pixels are written there (as decode_jpeg_scaled's) and valid until it changes.
/// With `whole`, the whole image is decoded at the same scale into *whole (BGR, libjpeg's
/// scaled size; in `scratch` when given), every row checked, and `pixels` is the part of it a
/// region decode would return, in the same place: one decode serves the output and a hash of
/// the whole image (convert --dedup), and the output is the same (tests/e2e/test_dedup.py).
RegionDecode decode_jpeg_region(std::span<const uint8_t> data, int w, int h, const Geometry& g,
                                ResampleMode mode = ResampleMode::Area,
                                std::vector<uint8_t>* scratch = nullptr, cv::Mat* whole = nullptr);

/// The pixels libjpeg converts to: BGR (OpenCV's order), RGB, or grey (a grey JPEG's own
/// values; a colour JPEG's luma, which is not OpenCV's grey conversion).
enum class JpegPixels { Bgr, Rgb, Grey };

struct ScaledRegion {
  cv::Mat pixels;  ///< part of the image decoded at 1/denom scale; empty when the rect missed it
  int denom = 1;
  int x0 = 0, y0 = 0;  ///< where pixels(0, 0) lies in the scaled image
  /// Maps `pixels` coordinates to the full-resolution image's: scaled pixel p is about the
  /// mean of full-resolution pixels [d p, d p + d) (d = denom), centred at d p + (d - 1) / 2.
  Affine to_full() const;
};

/// Decodes `rect` (scaled pixels, clipped to the image of ceil(w / denom) x ceil(h / denom))
/// of a JPEG of size w x h (stored orientation 1, not CMYK) at 1/denom scale, denom 1, 2, 4 or
/// 8; its columns may start earlier (libjpeg widens them to whole iMCUs). Where the columns
/// start or end inside the image, that first or last column may differ from a whole decode by
/// a few levels (fancy chroma upsampling lacks its neighbour there). Rows above are
/// skipped and rows below not read, so corruption there is not seen. Throws ParseError for
/// corrupt data up to the last row read, a stream without its end-of-image marker, or a
/// header whose size is not w x h. With `scratch` the pixels are written there (grown as
/// needed, never shrunk) and valid until it changes: a caller decoding many images reuses one
/// warm buffer instead of faulting in a new one each time (224² warps ran 25 % slower).
ScaledRegion decode_jpeg_scaled(std::span<const uint8_t> data, int w, int h, int denom,
                                cv::Rect rect, JpegPixels pixels,
                                std::vector<uint8_t>* scratch = nullptr);

/// Decodes the whole JPEG at 1/8 scale: every entropy-coded byte is checked, little IDCT
/// work is done. Throws ParseError for corrupt or truncated data.
void validate_jpeg(std::span<const uint8_t> data);

}  // namespace tarmac
