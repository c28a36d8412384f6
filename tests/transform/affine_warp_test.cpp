// warp_affine_linear against its oracle, OpenCV's own cv::warpAffine: byte for byte, by every
// kernel this CPU runs (AVX-512 and AVX2 where it has them, and what the library picks).
#include "transform/affine_warp.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

#include "transform/affine_warp_internal.h"

using namespace tarmac;
using detail::WarpKernel;

namespace {

const char* kernel_name(WarpKernel k) {
  switch (k) {
    case WarpKernel::Auto:
      return "auto";
    case WarpKernel::Avx512:
      return "avx512";
    case WarpKernel::Avx2:
      return "avx2";
    case WarpKernel::OpenCV:
      return "opencv";
  }
  return "?";
}

// The kernels to check here: Auto (what the library runs) and each vector kernel the CPU has.
std::vector<WarpKernel> kernels() {
  std::vector<WarpKernel> out = {WarpKernel::Auto};
  for (WarpKernel k : {WarpKernel::Avx512, WarpKernel::Avx2})
    if (detail::warp_kernel_supported(k)) out.push_back(k);
  return out;
}

cv::Mat opencv_warp(const cv::Mat& src, const Affine& m, cv::Size size, double fill) {
  cv::Mat out;
  cv::warpAffine(src, out, cv::Mat(2, 3, CV_64F, const_cast<double*>(m.data())), size,
                 cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(fill));
  return out;
}

}  // namespace

// Own generators: OpenCV's global one feeds other tests' fixtures.
TEST_CASE("warp_affine_linear gives cv::warpAffine's bytes for any map, size and border") {
  const WarpKernel kernel = GENERATE(from_range(kernels()));
  INFO("kernel " << kernel_name(kernel));
  std::mt19937 rng(26);
  cv::RNG pixels(26);
  std::uniform_real_distribution<double> u(0, 1);
  for (int t = 0; t < 300; ++t) {
    const int sw = 2 + int(u(rng) * 300), sh = 2 + int(u(rng) * 300);
    const cv::Size size(1 + int(u(rng) * 240), 1 + int(u(rng) * 240));
    // Some sources are views with a row step wider than their pixels.
    cv::Mat parent(sh + 3, sw + 5, CV_8UC3);
    pixels.fill(parent, cv::RNG::UNIFORM, 0, 256);
    const cv::Mat src = t % 3 == 0 ? parent(cv::Rect(2, 1, sw, sh))
                                   : parent.clone()(cv::Rect(0, 0, sw, sh)).clone();
    const double angle = (2 * u(rng) - 1) * 3.2, scale = 0.1 + u(rng) * 4;
    const double flip = u(rng) < 0.5 ? -1 : 1;
    Affine m = {scale * std::cos(angle) * flip, scale * std::sin(angle),
                (u(rng) - 0.3) * size.width,    -scale * std::sin(angle) * flip,
                scale * std::cos(angle),        (u(rng) - 0.3) * size.height};
    if (t % 4 == 0) m[1] = m[3] = 0;  // axis-aligned: a crop and resize
    if (t % 25 == 0) m[2] += 5000;    // wholly outside
    const double fill = std::floor(u(rng) * 256);
    cv::Mat got;
    detail::warp_affine_linear(src, got, m, size, fill, kernel);
    INFO("case " << t << ": " << sw << "x" << sh << " -> " << size);
    REQUIRE(got.size() == size);
    REQUIRE(got.type() == CV_8UC3);
    CHECK(cv::norm(got, opencv_warp(src, m, size, fill), cv::NORM_INF) == 0);
  }
}

TEST_CASE("warp_affine_linear writes into a caller's buffer and hands other types to OpenCV") {
  cv::RNG pixels(3);
  cv::Mat src(40, 50, CV_8UC3);
  pixels.fill(src, cv::RNG::UNIFORM, 0, 256);
  const Affine m = {0.9, 0.2, 3, -0.2, 0.9, 7};
  std::vector<uint8_t> buffer(32 * 24 * 3 + 1, 0xAB);
  cv::Mat view(24, 32, CV_8UC3, buffer.data());
  warp_affine_linear(src, view, m, {32, 24}, 9);
  CHECK(view.data == buffer.data());
  CHECK(cv::norm(view, opencv_warp(src, m, {32, 24}, 9), cv::NORM_INF) == 0);
  CHECK(buffer.back() == 0xAB);  // not a byte past the output
  cv::Mat grey(40, 50, CV_8UC1), got;
  pixels.fill(grey, cv::RNG::UNIFORM, 0, 256);
  warp_affine_linear(grey, got, m, {32, 24}, 200);
  CHECK(cv::norm(got, opencv_warp(grey, m, {32, 24}, 200), cv::NORM_INF) == 0);
}

// The vector kernels store 16 to 64 bytes at a time: none may land outside the output's rows
// (a batch slot's neighbour, a view's parent), whatever the map.
TEST_CASE("warp_affine_linear writes only the pixels of its output") {
  const WarpKernel kernel = GENERATE(from_range(kernels()));
  INFO("kernel " << kernel_name(kernel));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  cv::RNG pixels(7);
  cv::Mat src(60, 70, CV_8UC3);
  pixels.fill(src, cv::RNG::UNIFORM, 0, 256);
  for (int t = 0; t < 60; ++t) {
    const cv::Size size(1 + int(u(rng) * 50), 1 + int(u(rng) * 40));
    cv::Mat parent(size.height + 2, size.width + 7, CV_8UC3, cv::Scalar::all(0xAB));
    cv::Mat view = parent(cv::Rect(1, 1, size.width, size.height));
    const double angle = u(rng) * 6.3, scale = 0.3 + u(rng) * 2;
    const Affine m = {scale * std::cos(angle),  scale * std::sin(angle), (u(rng) - 0.5) * 140,
                      -scale * std::sin(angle), scale * std::cos(angle), (u(rng) - 0.5) * 120};
    detail::warp_affine_linear(src, view, m, size, 9, kernel);
    INFO("case " << t << ": -> " << size);
    REQUIRE(view.data == parent.data + parent.step + 3);
    CHECK(cv::norm(view, opencv_warp(src, m, size, 9), cv::NORM_INF) == 0);
    cv::Mat outside = parent.clone();
    outside(cv::Rect(1, 1, size.width, size.height)).setTo(cv::Scalar::all(0xAB));
    CHECK(cv::countNonZero(outside.reshape(1) != 0xAB) == 0);
  }
}

// The 8-byte tap loads read two bytes past a pixel pair: from sources held in buffers of exactly
// their size (rows strided or not), the sanitizer build (scripts/ci-sanitize.sh) sees any byte
// read past the last pixel.
TEST_CASE("warp_affine_linear reads only the bytes of its source") {
  const WarpKernel kernel = GENERATE(from_range(kernels()));
  INFO("kernel " << kernel_name(kernel));
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (int t = 0; t < 200; ++t) {
    const int sw = 3 + int(u(rng) * 40), sh = 2 + int(u(rng) * 40);
    const size_t step = size_t(sw) * 3 + size_t(t % 2 ? 0 : 1 + t % 3);
    std::vector<uint8_t> bytes(step * size_t(sh - 1) + size_t(sw) * 3);
    for (uint8_t& b : bytes) b = uint8_t(rng());
    const cv::Mat src(sh, sw, CV_8UC3, bytes.data(), step);
    const cv::Size size(1 + int(u(rng) * 60), 1 + int(u(rng) * 40));
    const double angle = u(rng) * 6.3, scale = 0.2 + u(rng) * 3;
    const Affine m = {scale * std::cos(angle),     scale * std::sin(angle),
                      (u(rng) - 0.4) * size.width, -scale * std::sin(angle),
                      scale * std::cos(angle),     (u(rng) - 0.4) * size.height};
    cv::Mat got;
    detail::warp_affine_linear(src, got, m, size, 7, kernel);
    INFO("case " << t << ": " << sw << "x" << sh << " (step " << step << ") -> " << size);
    CHECK(cv::norm(got, opencv_warp(src, m, size, 7), cv::NORM_INF) == 0);
  }
}
