#include "preview/contact_sheet.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "convert/dataset_writer.h"

using namespace tarmac;
namespace fs = std::filesystem;

namespace {

// Sample `key`: a uniform w x 20 PNG of colour `rgb`, a box field `bb` F32 [4] and a points
// field `kp` F32 [1, 2].
ProcessedSample sample(const std::string& key, int w, cv::Vec3b rgb, std::vector<float> bb,
                       std::vector<float> kp) {
  ProcessedSample s;
  s.key = key;
  const cv::Mat bgr(20, w, CV_8UC3, cv::Scalar(rgb[2], rgb[1], rgb[0]));
  std::vector<uint8_t> png;
  REQUIRE(cv::imencode(".png", bgr, png));
  s.image.member_suffix = "png";
  s.image.bytes = png;
  s.image.width = w;
  s.image.height = 20;
  const auto field = [&](const char* name, const std::vector<float>& v,
                         std::vector<int64_t> shape) {
    SampleField f{name, key + ".json", "json", {}};
    f.value.dtype = DType::F32;
    f.value.shape = std::move(shape);
    f.value.data.resize(v.size() * 4);
    std::memcpy(f.value.data.data(), v.data(), v.size() * 4);
    return f;
  };
  s.fields = {field("bb", bb, {4}), field("kp", kp, {1, 2})};
  return s;
}

// Two samples: "a" 30 x 20, (10, 20, 30), a box x 5..15, y 4..12 (as xywh) and a point at
// (22, 15); "b" 10 x 20, (200, 100, 50), its box and point outside its image.
fs::path make_dataset() {
  const fs::path d =
      fs::temp_directory_path() / ("tarmac-preview-test-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  ConvertOptions o;
  o.transform.format = OutputFormat::Png;
  DatasetWriter w(o, d, nullptr);
  ProcessedSample a = sample("a", 30, {10, 20, 30}, {5, 4, 10, 8}, {22, 15});
  ProcessedSample b = sample("b", 10, {200, 100, 50}, {100, 100, 1, 1}, {-50, -50});
  w.add(a);
  w.add(b);
  w.finish("tarmac test");
  return d;
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
  const fs::path dir = make_dataset();
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
  const fs::path dir = make_dataset();
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
