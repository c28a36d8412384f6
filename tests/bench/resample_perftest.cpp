// The resampler's cost at W2's shrinks (docs/performance.md, "Resampling"): a 1200² RGB region
// of noise shrunk to 512² (0.427) and a 1500² one to 512² (0.341), by area_resample on 8-bit
// pixels (the fixed-point path); the same with a pad of 0.5, which the fixed-point path does
// not take, so the float path that 8-bit sources took before (with 9b05e10's AVX2 pairs; no
// pixel reads the pad here); and cv::resize(INTER_AREA) on one thread, for scale.
// Run: build/tests/bench/resample_perftest --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "transform/resample.h"

namespace {

enum class Path { Fixed, Float, OpenCV };

void BM_Shrink(benchmark::State& state, Path path) {
  const int n = static_cast<int>(state.range(0)), out = 512;
  cv::Mat src(n, n, CV_8UC3);
  cv::RNG(7).fill(src, cv::RNG::UNIFORM, 0, 256);
  cv::setNumThreads(1);
  const double s = double(out) / n;
  const tarmac::Affine m{s, 0, 0.5 * s - 0.5, 0, s, 0.5 * s - 0.5};
  for (auto _ : state) {
    cv::Mat dst;
    if (path == Path::OpenCV)
      cv::resize(src, dst, cv::Size(out, out), 0, 0, cv::INTER_AREA);
    else
      dst = tarmac::area_resample(src, m, out, out, path == Path::Float ? 0.5 : 0);
    benchmark::DoNotOptimize(dst.data);
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_Shrink, fixed_u8, Path::Fixed)
    ->Arg(1200)
    ->Arg(1500)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Shrink, float_u8, Path::Float)
    ->Arg(1200)
    ->Arg(1500)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Shrink, opencv_inter_area, Path::OpenCV)
    ->Arg(1200)
    ->Arg(1500)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
