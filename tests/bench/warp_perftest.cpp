// The augmentation's warp (docs/performance.md, "Augmentation in the batch decode"): a 224² RGB
// output of a 224² source by cv::warpAffine and by transform/affine_warp's kernels (the same
// bytes). Two maps: rotation 17° and scale 1.1 (the output inside the source), and the
// augmentation's draws (flip 0.5, rotation ±30°, scale 0.75-1.25 about the centre, 64 of them
// in turn: borders and fill included).
// Run: build/tests/bench/warp_perftest --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

#include "transform/affine_warp_internal.h"

namespace {

using tarmac::detail::WarpKernel;

tarmac::Affine about_centre(double angle, double scale, bool flip) {
  const cv::Mat r = cv::getRotationMatrix2D(cv::Point2f(111.5f, 111.5f), angle, scale);
  tarmac::Affine m{};
  for (int k = 0; k < 6; ++k) m[size_t(k)] = r.at<double>(k / 3, k % 3);
  if (flip) m = {-m[0], -m[1], 223 - m[2], m[3], m[4], m[5]};
  return m;
}

struct Case {
  cv::Mat src, dst;
  std::vector<tarmac::Affine> maps;
  explicit Case(bool augment) : src(224, 224, CV_8UC3), dst(224, 224, CV_8UC3) {
    cv::RNG(1).fill(src, cv::RNG::UNIFORM, 0, 256);
    if (!augment) {
      maps = {about_centre(17, 1.1, false)};
      return;
    }
    std::mt19937 rng(1);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < 64; ++i) {
      const double angle = (2 * u(rng) - 1) * 30, scale = 0.75 + 0.5 * u(rng);
      maps.push_back(about_centre(angle, scale, u(rng) < 0.5));
    }
  }
};

void BM_WarpOpenCV(benchmark::State& state) {
  cv::setNumThreads(1);
  Case c(state.range(0) != 0);
  size_t i = 0;
  for (auto _ : state) {
    const cv::Mat map(2, 3, CV_64F, c.maps[i++ % c.maps.size()].data());
    cv::warpAffine(c.src, c.dst, map, c.dst.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);
  }
}
BENCHMARK(BM_WarpOpenCV)->ArgName("augment")->Arg(0)->Arg(1);

template <WarpKernel kernel>
void BM_WarpTarmac(benchmark::State& state) {
  if (!tarmac::detail::warp_kernel_supported(kernel)) {
    state.SkipWithError("this CPU lacks the kernel");
    return;
  }
  Case c(state.range(0) != 0);
  size_t i = 0;
  for (auto _ : state)
    tarmac::detail::warp_affine_linear(c.src, c.dst, c.maps[i++ % c.maps.size()], c.dst.size(), 0,
                                       kernel);
}
BENCHMARK_TEMPLATE(BM_WarpTarmac, WarpKernel::Avx2)->ArgName("augment")->Arg(0)->Arg(1);
BENCHMARK_TEMPLATE(BM_WarpTarmac, WarpKernel::Avx512)->ArgName("augment")->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
