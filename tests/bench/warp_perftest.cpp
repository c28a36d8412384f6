// The augmentation's warp (docs/performance.md, "Augmentation in the batch decode"): a 224² RGB
// output, rotated and scaled, by cv::warpAffine and by transform/affine_warp (the same bytes).
// Run: build/tests/bench/warp_perftest
#include <benchmark/benchmark.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "transform/affine_warp.h"

namespace {

struct Case {
  cv::Mat src, dst;
  tarmac::Affine m{};
  Case() : src(224, 224, CV_8UC3), dst(224, 224, CV_8UC3) {
    cv::RNG(1).fill(src, cv::RNG::UNIFORM, 0, 256);
    const cv::Mat r = cv::getRotationMatrix2D(cv::Point2f(111.5f, 111.5f), 17, 1.1);
    for (int k = 0; k < 6; ++k) m[size_t(k)] = r.at<double>(k / 3, k % 3);
  }
};

void BM_WarpOpenCV(benchmark::State& state) {
  cv::setNumThreads(1);
  Case c;
  const cv::Mat map(2, 3, CV_64F, c.m.data());
  for (auto _ : state)
    cv::warpAffine(c.src, c.dst, map, c.dst.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);
}
BENCHMARK(BM_WarpOpenCV);

void BM_WarpTarmac(benchmark::State& state) {
  Case c;
  for (auto _ : state) tarmac::warp_affine_linear(c.src, c.dst, c.m, c.dst.size(), 0);
}
BENCHMARK(BM_WarpTarmac);

}  // namespace

BENCHMARK_MAIN();
