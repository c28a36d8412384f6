// libFuzzer target: a COCO segmentation (polygons, uncompressed or compressed RLE) parsed from
// arbitrary bytes and rasterised in a small image must give a 0/1 mask of that size or throw
// ParseError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "transform/coco_mask.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const tarmac::CocoSegmentation s = tarmac::parse_coco_segmentation(text, 1 << 16);
    // An RLE is drawn in its own size (else refused), polygons in a 40 x 30 image.
    const int w = s.rle ? static_cast<int>(s.width) : 40,
              h = s.rle ? static_cast<int>(s.height) : 30;
    const cv::Mat m = tarmac::rasterise_segmentation(s, w, h);
    if (m.cols != w || m.rows != h || m.type() != CV_8U) std::abort();
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        if (m.at<uint8_t>(y, x) > 1) std::abort();
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
