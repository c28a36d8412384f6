// libFuzzer target: the image decoders on arbitrary bytes, as a conversion calls them
// (decode_image, decode_dense; for JPEGs also validate_jpeg and decode_jpeg_region with a
// centre crop). Each must return pixels within the pixel limit or throw ParseError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>

#include <opencv2/core.hpp>

#include "common/error.h"
#include "transform/geometry.h"
#include "transform/image_codec.h"
#include "transform/jpeg_region.h"

namespace {
constexpr uint64_t kMaxPixels = 1 << 20;  // small, so that a claimed huge size is refused early

void check(const cv::Mat& m) {
  // EXIF orientation may transpose, but never changes the pixel count.
  if (m.empty() || static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols) > kMaxPixels)
    __builtin_trap();
}

// The crop path of sample_processor.cpp: a plain JPEG decoded only as far as the crop needs.
void region(std::span<const uint8_t> bytes) {
  const tarmac::ImageHeader h = tarmac::probe_image(bytes);
  tarmac::check_image_pixels(h, kMaxPixels);
  if (h.format != tarmac::ImageFormat::Jpeg || h.cmyk || h.width <= 0) return;
  tarmac::validate_jpeg(bytes);
  tarmac::GeometryOptions o;
  o.crop = tarmac::CropMode::Center;
  o.width = o.height = 16;
  o.resize = tarmac::ResizeMode::Exact;
  const tarmac::Geometry g = tarmac::compute_geometry(o, h.width, h.height, std::nullopt);
  const tarmac::RegionDecode rd = tarmac::decode_jpeg_region(bytes, h.width, h.height, g);
  if (!rd.pixels.empty() && rd.pixels.type() != CV_8UC3) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // TIFF sizes are checked by OpenCV's own limit (probe_image cannot read them): keep it as
  // small as ours, or the fuzzer hits its memory limit instead of finding bugs.
  ::setenv("OPENCV_IO_MAX_IMAGE_PIXELS", "1048576", 1);
  cv::setNumThreads(0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const cv::Mat m = tarmac::decode_image(bytes, kMaxPixels);
    if (m.type() != CV_8UC3) __builtin_trap();
    check(m);
  } catch (const tarmac::ParseError&) {
  }
  try {
    check(tarmac::decode_dense(bytes, kMaxPixels));
  } catch (const tarmac::ParseError&) {
  }
  try {
    region(bytes);
  } catch (const tarmac::ParseError&) {
  } catch (const tarmac::SampleError&) {  // compute_geometry: an empty region or output
  }
  return 0;
}
