#pragma once
// COCO `segmentation` values (polygons, or run-length encodings as cocodataset/cocoapi's
// maskApi writes them) turned into masks in their image, for convert --masks
// (docs/format.md, "Geometric kinds"). The RLE decoder is written from maskApi's format (a
// few lines; pycocotools would bring Cython and a Python runtime into the converter).
#include <cstdint>
#include <opencv2/core.hpp>
#include <string_view>
#include <vector>

namespace tarmac {

/// One object's segmentation: polygons (each x0, y0, x1, y1, ... in pixel-centre
/// coordinates), or an RLE of a height x width mask: runs of 0s and 1s alternately, 0s first,
/// in column-major order (maskApi's).
struct CocoSegmentation {
  bool rle = false;
  std::vector<std::vector<double>> polygons;
  int64_t height = 0, width = 0;
  std::vector<uint64_t> counts;
};

/// Parses the JSON text of a segmentation: an array of polygons (arrays of numbers; one
/// array of numbers is one polygon), or {"counts": [...] | "compressed", "size": [h, w]}.
/// Throws ParseError with the reason: an odd number of coordinates, a vertex not finite or
/// beyond 2^24 pixels, a malformed compressed string, counts that do not sum to h * w.
/// `max_pixels` bounds h * w (the RLE is checked before anything is allocated for it).
CocoSegmentation parse_coco_segmentation(std::string_view json_text, uint64_t max_pixels);

/// The counts of maskApi's compressed RLE string (rleFrString: 6-bit digits from '0',
/// little-endian 5-bit groups with a continuation bit, each count after the second a delta on
/// the one two before). Throws ParseError for a malformed string or one whose counts do not
/// sum to height * width.
std::vector<uint64_t> rle_from_string(std::string_view s, int64_t height, int64_t width);

/// Checks that runs sum to height * width (ParseError otherwise).
void check_rle_counts(const std::vector<uint64_t>& counts, int64_t height, int64_t width);

/// The mask of `s` in a width x height image: CV_8U, 1 inside, 0 outside. Polygons are filled
/// as cv::fillPoly fills them (8-connected, every polygon on its own, their union), each vertex
/// rounded to the nearest pixel centre (floor(v + 0.5)). Throws ParseError when an RLE's size
/// is not the image's.
cv::Mat rasterise_segmentation(const CocoSegmentation& s, int width, int height);

}  // namespace tarmac
