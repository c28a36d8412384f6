// libtarmac_opencv_codecs.so: OpenCV's imgcodecs behind the table in opencv_codecs_internal.h,
// loaded on first use by opencv_codecs.cpp. Nothing else in tarmac links imgcodecs.
#include <exception>
#include <opencv2/imgcodecs.hpp>

#include "transform/opencv_codecs_internal.h"

namespace {

using tarmac::detail::CvDecodeMode;
using tarmac::detail::CvEncodeFormat;

bool decode(const uint8_t* data, size_t size, CvDecodeMode mode, cv::Mat* out, std::string* error) {
  try {
    const cv::Mat buf(1, static_cast<int>(size), CV_8U, const_cast<uint8_t*>(data));
    *out = cv::imdecode(buf, mode == CvDecodeMode::Bgr8 ? cv::IMREAD_COLOR : cv::IMREAD_UNCHANGED);
    if (out->empty()) *error = "decoder refused the data";
    return !out->empty();
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

bool encode(const cv::Mat* img, CvEncodeFormat format, int param, std::vector<uint8_t>* out,
            std::string* error) {
  try {
    const bool png = format == CvEncodeFormat::Png;
    const std::vector<int> params = {png ? cv::IMWRITE_PNG_COMPRESSION : cv::IMWRITE_WEBP_QUALITY,
                                     param};
    if (!cv::imencode(png ? ".png" : ".webp", *img, *out, params)) {
      *error = "encoder refused the pixels";
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

const tarmac::detail::OpenCvCodecsV1 kTable{decode, encode};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tarmac::detail::OpenCvCodecsV1*
tarmac_opencv_codecs_v1() {
  return &kTable;
}
