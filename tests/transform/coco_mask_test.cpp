#include "transform/coco_mask.h"

#include <catch2/catch.hpp>
#include <opencv2/imgproc.hpp>

#include "common/error.h"

using namespace tarmac;
using Catch::Matchers::Contains;

namespace {

// maskApi's rleToString, written from its format (not its code) for the test
// (each count after the second a delta on the one two before).
std::string encode(const std::vector<int64_t>& counts) {
  std::string s;
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t x = counts[i] - (i > 2 ? counts[i - 2] : 0);
    bool more = true;
    while (more) {
      int c = static_cast<int>(x & 0x1f);
      x >>= 5;
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      s += static_cast<char>(c + 48);
    }
  }
  return s;
}

}  // namespace

TEST_CASE("coco mask: uncompressed RLE is column-major, 0s first") {
  // 3 x 2 (h x w): column 0 = 0,1,1; column 1 = 1,0,0.
  const auto s = parse_coco_segmentation(R"({"counts":[1,3,2],"size":[3,2]})", 1 << 20);
  REQUIRE(s.rle);
  const cv::Mat m = rasterise_segmentation(s, 2, 3);
  const uint8_t want[3][2] = {{0, 1}, {1, 0}, {1, 0}};
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 2; ++x) CHECK(m.at<uint8_t>(y, x) == want[y][x]);
}

TEST_CASE("coco mask: compressed strings decode to their counts, deltas and signs too") {
  const std::vector<int64_t> counts = {5, 40, 3, 1, 30, 2, 519, 0, 400};
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const std::string s = encode(counts);
  const auto got = rle_from_string(s, 1, total);
  CHECK(std::vector<int64_t>(got.begin(), got.end()) == counts);
  CHECK_THROWS_WITH(rle_from_string(s, 1, total + 1), Contains("sum to"));
  CHECK_THROWS_WITH(rle_from_string(s.substr(0, s.size() - 1) + "\x7f", 1, total),
                    Contains("outside '0'..'o'"));
  CHECK_THROWS_WITH(rle_from_string("P", 1, 10), Contains("ends inside a count"));
}

TEST_CASE("coco mask: polygons fill as cv::fillPoly, vertices rounded to pixel centres") {
  const auto s = parse_coco_segmentation("[[1.4,1.6,8.5,1,8,6.49],[20,20,25,20,25,25]]", 1 << 20);
  REQUIRE_FALSE(s.rle);
  REQUIRE(s.polygons.size() == 2);
  const cv::Mat m = rasterise_segmentation(s, 30, 30);
  cv::Mat want(30, 30, CV_8U, cv::Scalar(0));
  const std::vector<std::vector<cv::Point>> polys = {{{1, 2}, {9, 1}, {8, 6}},
                                                     {{20, 20}, {25, 20}, {25, 25}}};
  for (const auto& p : polys) cv::fillPoly(want, std::vector<std::vector<cv::Point>>{p}, 1);
  CHECK(cv::countNonZero(m != want) == 0);
  CHECK(cv::countNonZero(m) > 0);
  // One flat array of numbers is one polygon.
  CHECK(parse_coco_segmentation("[1,1,5,1,5,5]", 100).polygons.size() == 1);
}

TEST_CASE("coco mask: bad input is refused with the reason") {
  CHECK_THROWS_WITH(parse_coco_segmentation("[[1,2,3]]", 100), Contains("odd number"));
  CHECK_THROWS_WITH(parse_coco_segmentation("[[1,2,3,1e30]]", 100), Contains("beyond 2^24"));
  CHECK_THROWS_WITH(parse_coco_segmentation(R"({"counts":[1,2],"size":[2,2]})", 100),
                    Contains("sum to 3, not its size 2 x 2"));
  CHECK_THROWS_WITH(parse_coco_segmentation(R"({"counts":[1,-2],"size":[2,2]})", 100),
                    Contains("not a count"));
  CHECK_THROWS_WITH(parse_coco_segmentation(R"({"counts":[],"size":[2000,2000]})", 1000),
                    Contains("--max-pixels"));
  CHECK_THROWS_WITH(parse_coco_segmentation(R"({"size":[2,2]})", 100), Contains("neither"));
  CHECK_THROWS_WITH(parse_coco_segmentation("{", 100), Contains("not JSON"));
  const auto s = parse_coco_segmentation(R"({"counts":[4],"size":[2,2]})", 100);
  CHECK_THROWS_WITH(rasterise_segmentation(s, 3, 2), Contains("another image's"));
}
