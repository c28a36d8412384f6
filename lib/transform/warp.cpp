#include "transform/warp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "common/error.h"
#include "transform/resample.h"

namespace tarmac {
namespace {

cv::Mat to_cv(const Affine& m) {
  return (cv::Mat_<double>(2, 3) << m[0], m[1], m[2], m[3], m[4], m[5]);
}

}  // namespace

Affine compose(const Affine& a, const Affine& b) {
  return {a[0] * b[0] + a[1] * b[3], a[0] * b[1] + a[1] * b[4], a[0] * b[2] + a[1] * b[5] + a[2],
          a[3] * b[0] + a[4] * b[3], a[3] * b[1] + a[4] * b[4], a[3] * b[2] + a[4] * b[5] + a[5]};
}

Affine dense_to_image(int dw, int dh, int iw, int ih) {
  const double sx = static_cast<double>(iw) / dw, sy = static_cast<double>(ih) / dh;
  return {sx, 0, 0.5 * sx - 0.5, 0, sy, 0.5 * sy - 0.5};
}

cv::Mat warp_image(const cv::Mat& src, const Affine& m, int out_w, int out_h, double pad) {
  // Enlarging (or keeping) both axes: bilinear, as OpenCV does it. Shrinking either axis: the
  // area average of each output pixel's footprint (resample.h), at the map's exact offset.
  const bool shrinks = m[0] < 1 || m[4] < 1;
  if (shrinks && axis_aligned(m) && (src.depth() == CV_8U || src.depth() == CV_32F) &&
      src.channels() <= 4)
    return area_resample(src, m, out_w, out_h, pad);
  cv::Mat out;
  cv::warpAffine(src, out, to_cv(m), cv::Size(out_w, out_h), cv::INTER_LINEAR, cv::BORDER_CONSTANT,
                 cv::Scalar::all(pad));
  return out;
}

cv::Rect warp_source_rect(const Affine& m, int out_w, int out_h, int src_w, int src_h) {
  const cv::Rect whole(0, 0, src_w, src_h);
  if (!(m[0] > 0 && m[4] > 0) || m[1] != 0 || m[3] != 0 || !std::isfinite(m[2]) ||
      !std::isfinite(m[5]))
    return whole;
  // A shrink averages the footprint [u0, u1] (pixels floor(u0 + .5) ... ceil(u1 + .5) - 1),
  // bilinear taps reach one pixel past the mapped range; 2 / scale + 4 covers both with room
  // to spare (and the PNG and JPEG region decoders round it out to their own blocks).
  auto range = [](double scale, double t, int out, int size, int& lo, int& hi) {
    const double u0 = (-0.5 - t) / scale, u1 = (out - 0.5 - t) / scale;
    const double margin = 2.0 * std::max(1.0, 1.0 / scale) + 4;
    const double a = std::floor(u0 - margin), b = std::ceil(u1 + margin) + 1;
    lo = static_cast<int>(std::clamp(a, 0.0, double(size)));
    hi = static_cast<int>(std::clamp(b, 0.0, double(size)));
  };
  int x0, x1, y0, y1;
  range(m[0], m[2], out_w, src_w, x0, x1);
  range(m[4], m[5], out_h, src_h, y0, y1);
  if (x1 <= x0 || y1 <= y0) return {};
  return {x0, y0, x1 - x0, y1 - y0};
}

cv::Mat warp_dense(const cv::Mat& src, const Affine& m, int out_w, int out_h) {
  cv::Mat out;
  cv::warpAffine(src, out, to_cv(m), cv::Size(out_w, out_h), cv::INTER_NEAREST, cv::BORDER_CONSTANT,
                 cv::Scalar::all(0));
  return out;
}

std::vector<uint8_t> warp_dense_bytes(std::span<const uint8_t> src, int cols, int rows,
                                      size_t pixel_bytes, const Affine& m, int out_w, int out_h) {
  if (cols <= 0 || rows <= 0 || int64_t{cols} * rows > INT32_MAX ||
      src.size() != size_t(cols) * size_t(rows) * pixel_bytes)
    throw InternalError("warp_dense_bytes: bad source size");
  // OpenCV warps only some element types; an index map (int32, which it warps) gives the
  // source pixel of every output pixel for any type, and the bytes are then copied.
  cv::Mat index(rows, cols, CV_32SC1);
  int32_t next = 0;
  for (int y = 0; y < rows; ++y) {
    int32_t* row = index.ptr<int32_t>(y);
    for (int x = 0; x < cols; ++x) row[x] = next++;
  }
  cv::Mat where;
  cv::warpAffine(index, where, to_cv(m), cv::Size(out_w, out_h), cv::INTER_NEAREST,
                 cv::BORDER_CONSTANT, cv::Scalar::all(-1));
  std::vector<uint8_t> out(size_t(out_w) * size_t(out_h) * pixel_bytes, 0);
  uint8_t* o = out.data();
  for (int y = 0; y < out_h; ++y) {
    const int32_t* row = where.ptr<int32_t>(y);
    for (int x = 0; x < out_w; ++x, o += pixel_bytes)
      if (row[x] >= 0) std::memcpy(o, src.data() + size_t(row[x]) * pixel_bytes, pixel_bytes);
  }
  return out;
}

}  // namespace tarmac
