#include "preview/contact_sheet.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

using namespace tarmac;
namespace fs = std::filesystem;

namespace {

// The dataset drawn: tests/data/datasets/sheet2, written from docs/format.md by
// make_datasets.py (no tarmac code: a writer bug cannot cancel a reader bug). Two samples: "a"
// a uniform 30 x 20 PNG of (10, 20, 30), a box `bb` F32 [4] x 5..15, y 4..12 (as xywh) and a
// point `kp` F32 [1, 2] at (22, 15); "b" 10 x 20, (200, 100, 50), its box and point outside
// its image.
fs::path fixture() {
  return fs::path(TARMAC_TEST_DATA) / "datasets" / "sheet2";
}

// The sheet's pixel (x, y) as RGB.
cv::Vec3b rgb_at(const cv::Mat& bgr, int x, int y) {
  const cv::Vec3b p = bgr.at<cv::Vec3b>(y, x);
  return {p[2], p[1], p[0]};
}

cv::Mat decoded(const preview::Sheet& s) {
  return cv::imdecode(
      cv::Mat(1, static_cast<int>(s.png.size()), CV_8UC1, const_cast<uint8_t*>(s.png.data())),
      cv::IMREAD_COLOR);
}

}  // namespace

TEST_CASE("contact sheet: cells laid out by hand's arithmetic, boxes and points where they are") {
  const fs::path dir = fixture();
  preview::SheetOptions o;
  o.dir = dir.string();
  o.keys = {"a", "b"};
  o.tile_height = 20;  // the images' height: drawn unscaled, 1 image pixel = 1 sheet pixel
  o.boxes = {"bb"};
  o.points = {"kp"};
  o.boxes_given = o.points_given = true;
  const preview::Sheet s = preview::draw_contact_sheet(o);
  // Two cells in one row (ceil(sqrt(2)) = 2 columns): margin 8, cell widths 30 and 10, gap 8,
  // cell height 20 + a caption of 20. Width 8 + 30 + 8 + 10 + 8, height 8 + 40 + 8.
  CHECK(s.width == 64);
  CHECK(s.height == 56);
  CHECK(s.keys == std::vector<std::string>{"a", "b"});
  const cv::Mat m = decoded(s);
  REQUIRE(m.cols == 64);
  REQUIRE(m.rows == 56);
  const cv::Vec3b background(24, 24, 24), red(255, 0, 0), green(0, 255, 0);
  const cv::Vec3b a(10, 20, 30), b(200, 100, 50);
  CHECK(rgb_at(m, 0, 0) == background);
  CHECK(rgb_at(m, 63, 55) == background);
  CHECK(rgb_at(m, 40, 20) == background);  // the gap between the cells
  // Cell a's image at (8, 8): its box's corners (5, 4) and (15, 12) drawn in the first box
  // colour; inside it, 4 pixels from every edge, the image.
  CHECK(rgb_at(m, 8 + 5, 8 + 4) == red);
  CHECK(rgb_at(m, 8 + 15, 8 + 12) == red);
  CHECK(rgb_at(m, 8 + 10, 8 + 8) == a);
  CHECK(rgb_at(m, 8 + 1, 8 + 18) == a);
  // The point (22, 15): a filled dot of radius 2 (tile height / 80, at least 2).
  CHECK(rgb_at(m, 8 + 22, 8 + 15) == green);
  CHECK(rgb_at(m, 8 + 22 + 2, 8 + 15) == green);
  CHECK(rgb_at(m, 8 + 22 + 5, 8 + 15) == a);
  // Cell b at x = 8 + 30 + 8: its box and point lie outside, so its image is untouched.
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 10; ++x) REQUIRE(rgb_at(m, 46 + x, 8 + y) == b);
}

TEST_CASE("contact sheet: a box as xyxy ends at its own corner, not at x + w") {
  const fs::path dir = fixture();
  preview::SheetOptions o;
  o.dir = dir.string();
  o.keys = {"a"};
  o.tile_height = 40;  // twice the image's height: every coordinate scaled by 2
  o.boxes = {"bb:xyxy"};
  o.boxes_given = o.points_given = true;  // no points
  const preview::Sheet s = preview::draw_contact_sheet(o);
  CHECK(s.width == 8 + 60 + 8);
  CHECK(s.height == 8 + 40 + 20 + 8);
  const cv::Mat m = decoded(s);
  const cv::Vec3b red(255, 0, 0), a(10, 20, 30);
  // xyxy (5, 4)-(10, 8), scaled by 2 with pixel centres kept (format.md 3: x' = 2 (x + 0.5)
  // - 0.5), rounded: corners (11, 9) and (21, 17).
  CHECK(rgb_at(m, 8 + 11, 8 + 9) == red);
  CHECK(rgb_at(m, 8 + 21, 8 + 17) == red);
  CHECK(rgb_at(m, 8 + 16, 8 + 13) == a);  // inside, 4 pixels or more from every edge
  CHECK(rgb_at(m, 8 + 31, 8 + 25) == a);  // where xywh's corner (15, 12) would be
  CHECK(rgb_at(m, 8 + 44, 8 + 30) == a);  // where the point would be: none drawn
}
