#pragma once
// `tarmac preview`: a contact sheet of a converted dataset's samples, so that a person sees
// what training will see: each stored image with its key under it, the label fields declared
// as points drawn as dots (and skeleton lines), boxes as rectangles, and each dense map
// colour-mapped beside its image. Its own stage (after read/): it reads a dataset through
// read/'s Dataset and draws with OpenCV; nothing else depends on it.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tarmac::preview {

struct SheetOptions {
  std::string dir;                ///< the dataset
  size_t n = 16;                  ///< samples drawn, chosen by `seed` (all when fewer)
  std::vector<std::string> keys;  ///< these samples instead, in this order
  uint64_t seed = 0;
  int tile_height = 256;  ///< every image (and dense map) is scaled to this height
  /// Fields to draw as points / boxes ("NAME" or "NAME:xyxy"); not given: those `convert` was
  /// given (the manifest's output_options --points / --boxes); given as {"none"}: none. A box
  /// is the first 4 values of its field's last axis (at least 4: x, y, w, h, confidence).
  std::vector<std::string> points, boxes;
  bool points_given = false, boxes_given = false;
  /// Joint pairs joined by lines, 1-based like COCO's categories[].skeleton.
  std::vector<std::pair<int, int>> skeleton;
};

/// What was drawn, for the summary.
struct Sheet {
  std::vector<uint8_t> png;  ///< the sheet, encoded (PNG, or JPEG when asked)
  int width = 0, height = 0;
  std::vector<std::string> keys;                  ///< the samples, in sheet order (row-major)
  std::vector<std::string> points, boxes, dense;  ///< the fields and maps drawn
};

/// The largest joint index --skeleton takes.
inline constexpr int kMaxSkeletonJoint = 65535;

/// Parses a --skeleton value: "coco" (COCO's 17-keypoint skeleton) or pairs "A-B,C-D,..."
/// of 1-based joint indices in [1, kMaxSkeletonJoint]. Throws ArgumentError saying what is wrong.
std::vector<std::pair<int, int>> parse_skeleton(const std::string& text);

/// Draws the sheet. `jpeg` encodes it as JPEG (quality 90) instead of PNG. Throws
/// ArgumentError for a key not in the dataset or a field that cannot be drawn, FatalError for
/// a dataset with nothing to draw (labels only), and the reader's errors.
Sheet draw_contact_sheet(const SheetOptions& o, bool jpeg = false);

}  // namespace tarmac::preview
