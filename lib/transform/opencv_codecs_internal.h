#pragma once
// The interface between tarmac and libtarmac_opencv_codecs.so, the plugin that holds
// OpenCV's imgcodecs. imgcodecs pulls ~140 shared libraries (GDAL, ICU, x265, ...) whose
// loading costs ~70 ms at every start and ~160 MB on disk, for formats a JPEG or WebP
// dataset never meets; the plugin is loaded on first use instead (opencv_codecs.cpp).
// Both sides are built from this tree by the same compiler, so C++ types may cross.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace tarmac::detail {

enum class CvDecodeMode : int { Bgr8 = 0, Unchanged = 1 };
enum class CvEncodeFormat : int { Png = 0, Webp = 1 };

/// Version 1 of the plugin's function table. No function throws: each returns false and
/// sets *error instead.
struct OpenCvCodecsV1 {
  bool (*decode)(const uint8_t* data, size_t size, CvDecodeMode mode, cv::Mat* out,
                 std::string* error);
  /// param: zlib level for PNG, quality for WebP.
  bool (*encode)(const cv::Mat* img, CvEncodeFormat format, int param, std::vector<uint8_t>* out,
                 std::string* error);
};

}  // namespace tarmac::detail

/// The plugin's one exported symbol.
extern "C" const tarmac::detail::OpenCvCodecsV1* tarmac_opencv_codecs_v1();
