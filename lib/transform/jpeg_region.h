#pragma once
// Decoding only the part of a JPEG that a crop needs, at the smallest DCT scale that still
// leaves the resampler to shrink (never to enlarge): rows above the region are skipped
// (their entropy data is read, no IDCT), columns outside are not colour-converted, and
// decoding stops after the region's last row. For a person box in a video frame, or a
// centre crop downscaled 2x or more, this is most of the cost of a full decode saved.
#include <cstdint>
#include <span>

#include <opencv2/core.hpp>

#include "transform/geometry.h"

namespace tarmac {

struct RegionDecode {
  cv::Mat
      pixels;  ///< BGR, the decoded part of the image (possibly empty when the crop lies outside)
  Affine m{};  ///< maps `pixels` coordinates to output coordinates
};

/// Decodes what the output of `g` needs from a JPEG of size w x h (stored orientation 1, not
/// CMYK). Throws ParseError for a corrupt stream or one without its end-of-image marker.
/// Corruption in rows after the region is not seen (they are not decoded). With
/// ResampleMode::AreaExact the region is decoded at full resolution (no DCT scaling).
RegionDecode decode_jpeg_region(std::span<const uint8_t> data, int w, int h, const Geometry& g,
                                ResampleMode mode = ResampleMode::Area);

/// Decodes the whole JPEG at 1/8 scale: every entropy-coded byte is checked, little IDCT
/// work is done. Throws ParseError for corrupt or truncated data.
void validate_jpeg(std::span<const uint8_t> data);

}  // namespace tarmac
