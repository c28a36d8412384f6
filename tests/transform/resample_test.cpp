#include <catch2/catch.hpp>

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "transform/resample.h"

using tarmac::Affine;
using tarmac::area_resample;
using tarmac::ShrinkFilter;

namespace {

cv::Mat noise(int w, int h, int type, uint64_t seed) {
  cv::Mat m(h, w, type);
  cv::RNG rng(seed);
  rng.fill(m, cv::RNG::UNIFORM, 0, 256);
  return m;
}

}  // namespace

// 8-bit sources of 3 and 4 channels take passes of their own: the area filter in fixed point
// (14-bit weights, 16-bit rows), the cubic in float two output pixels per vector where the CPU
// has AVX2 (taps padded with zero weights). A float source takes the per-pixel float loop, the
// reference here: the cubic's sums must be the same bit for bit (the 8-bit output is the float
// output rounded); the area's within 1/7 of a level (resample.cpp), so rounded the same but for
// values that close to a half.
TEST_CASE("area_resample: an 8-bit source gives its float copy's output, rounded") {
  struct Case {
    int w, h, out_w, out_h;
    double sx, tx, sy, ty, pad;
  };
  const Case cases[] = {
      {1200, 900, 512, 384, 512.0 / 1200, 512.0 / 2400 - 0.5, 384.0 / 900, 384.0 / 1800 - 0.5, 0},
      {333, 257, 101, 77, 0.31, 0.37, 0.29, -0.8, 0},    // odd output width
      {200, 150, 120, 90, 0.55, -20.3, 0.57, -9.1, 77},  // reaches past the right and bottom
      {200, 150, 64, 48, 0.3, 13.7, 0.3, 7.2, 200},      // and past the left and top
      {90, 60, 31, 20, 0.34, 0, 0.34, 0, 0},
      {50, 40, 7, 5, 0.1, 2.2, 0.1, 1.5, 10},  // more taps than a vector holds
      {64, 48, 33, 20, 0.5, 0.5, 0.4, 0, 0},   // one axis beyond the source on both sides
      {50, 40, 30, 20, 0.5, -40, 0.5, 0, 9},   // every column outside: the pad
      {40, 60, 101, 30, 2.5, -3, 0.5, 0, 0},   // an enlarging axis (linear) and a shrinking one
  };
  for (const Case& c : cases)
    for (int cn : {3, 4})
      for (ShrinkFilter f : {ShrinkFilter::Area, ShrinkFilter::Cubic}) {
        CAPTURE(c.w, c.h, c.out_w, c.out_h, cn, f == ShrinkFilter::Cubic);
        const cv::Mat src = noise(c.w, c.h, CV_8UC(cn), uint64_t(c.w * 7 + cn));
        cv::Mat fsrc;
        src.convertTo(fsrc, CV_32F);
        const Affine m{c.sx, 0, c.tx, 0, c.sy, c.ty};
        const cv::Mat got = area_resample(src, m, c.out_w, c.out_h, c.pad, f);
        const cv::Mat exact = area_resample(fsrc, m, c.out_w, c.out_h, c.pad, f);
        cv::Mat want;
        exact.convertTo(want, CV_8U);
        REQUIRE(got.type() == CV_8UC(cn));
        if (f == ShrinkFilter::Cubic) {
          CHECK(cv::norm(got, want, cv::NORM_INF) == 0);
        } else {
          // Within 1/7 of the float sum; rounded the same unless that is within 1/7 of a half.
          cv::Mat got_f;
          got.convertTo(got_f, CV_32F);
          CHECK(cv::norm(got_f, exact, cv::NORM_INF) < 0.5 + 1.0 / 7);
          int differ = 0;
          const cv::Mat e = exact.reshape(1), g = got.reshape(1), r = want.reshape(1);
          for (int y = 0; y < e.rows; ++y)
            for (int x = 0; x < e.cols; ++x) {
              const float v = e.at<float>(y, x);
              if (std::abs(v - std::floor(v) - 0.5f) > 1.0f / 7 &&
                  g.at<uint8_t>(y, x) != r.at<uint8_t>(y, x))
                ++differ;
            }
          CHECK(differ == 0);
        }
      }
}

TEST_CASE("area_resample: an 8-bit shrink of 0.34 to 0.57 is cv::resize's INTER_AREA") {
  // W2's range (1-3 MP centre crops to 512): whole images, so INTER_AREA sees the same map.
  for (int cn : {3, 4})
    for (const auto& [w, h, ow, oh] :
         {std::array{900, 700, 512, 399}, std::array{1500, 1100, 512, 376},
          std::array{1080, 1093, 512, 518}}) {
      CAPTURE(cn, w, h, ow, oh);
      const cv::Mat src = noise(w, h, CV_8UC(cn), uint64_t(w + cn));
      const double sx = double(ow) / w, sy = double(oh) / h;
      const cv::Mat got =
          area_resample(src, Affine{sx, 0, 0.5 * sx - 0.5, 0, sy, 0.5 * sy - 0.5}, ow, oh, 0);
      cv::Mat want;
      cv::resize(src, want, cv::Size(ow, oh), 0, 0, cv::INTER_AREA);
      CHECK(cv::norm(got, want, cv::NORM_INF) <= 1);
    }
}

TEST_CASE("area_resample: an 8-bit shrink by 2 rounds a tie to even") {
  // Each output pixel the mean of four: a quarter of those end in .5, where a fixed-point sum
  // rounded half up would differ from the float path and from numpy's round, which the e2e
  // tests' oracle uses (cv::resize's integer 2x path rounds them up).
  for (int cn : {3, 4}) {
    CAPTURE(cn);
    const cv::Mat src = noise(96, 64, CV_8UC(cn), uint64_t(cn));
    const cv::Mat got = area_resample(src, Affine{0.5, 0, -0.25, 0, 0.5, -0.25}, 48, 32, 0);
    int differ = 0;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 48; ++x)
        for (int c = 0; c < cn; ++c) {
          int sum = 0;
          for (int k = 0; k < 4; ++k)
            sum += src.ptr<uint8_t>(2 * y + k / 2)[(2 * x + k % 2) * cn + c];
          differ += got.ptr<uint8_t>(y)[x * cn + c] != int(std::nearbyint(sum / 4.0));
        }
    CHECK(differ == 0);
  }
}
