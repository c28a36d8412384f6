#pragma once
// OpenCV's imgcodecs, loaded on first use from libtarmac_opencv_codecs.so (see
// opencv_codecs_internal.h for why it is a plugin). Used for BMP, TIFF, CMYK JPEG, the PNGs
// png_region.h leaves to it (interlaced, eXIf) and for encoding PNG and WebP; JPEG never
// needs it.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "transform/opencv_codecs_internal.h"

namespace tarmac {

/// Decodes through cv::imdecode. Throws ParseError when the decoder refuses the data
/// ("corrupt <what>: ..."), FatalError when the plugin cannot be loaded.
cv::Mat opencv_decode(std::span<const uint8_t> data, detail::CvDecodeMode mode, const char* what);

/// Encodes through cv::imencode; param is the zlib level (PNG) or the quality (WebP).
/// Throws FatalError when encoding fails or the plugin cannot be loaded.
std::vector<uint8_t> opencv_encode(const cv::Mat& img, detail::CvEncodeFormat format, int param);

/// The paths tried for the plugin, in order: $TARMAC_OPENCV_CODECS alone when set; else
/// beside the library (or, for code linked into a program, the executable) holding this code,
/// then in its installed place relative to that (LIBDIR/tarmac/), then, for code run from the
/// build tree only, where the build put it.
std::vector<std::string> opencv_codecs_candidates();

}  // namespace tarmac
