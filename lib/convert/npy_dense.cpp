#include "convert/npy_dense.h"

#include <climits>

#include "common/error.h"
#include "format/field_spec.h"
#include "format/npy_blob.h"
#include "labels/npy.h"
#include "transform/warp.h"

namespace tarmac {

std::vector<uint8_t> npy_dense_map(std::span<const uint8_t> npy, int src_w, int src_h,
                                   const Geometry& g, uint64_t max_pixels) {
  const FieldValue v = parse_npy(npy);
  if (v.kind != FieldValue::Kind::Numeric)
    throw SampleError("dense map holds strings; a .npy dense map must be a numeric array",
                      ErrorCode::BadDenseMap);
  const auto& s = v.shape;
  if (s.size() != 2 && s.size() != 3)
    throw SampleError(
        "dense map has shape " + shape_text(s) + "; a .npy dense map must be H x W or H x W x C",
        ErrorCode::BadDenseMap);
  if (s[0] != src_h || s[1] != src_w)
    throw SampleError("dense map is " + std::to_string(s[1]) + "x" + std::to_string(s[0]) +
                          " (width x height, shape " + shape_text(s) + ") but the image is " +
                          std::to_string(src_w) + "x" + std::to_string(src_h) +
                          "; a .npy dense map must have the image's size",
                      ErrorCode::BadDenseMap);
  const int64_t channels = s.size() == 3 ? s[2] : 1;
  if (channels < 1)
    throw SampleError("dense map has shape " + shape_text(s) + ": no channels",
                      ErrorCode::BadDenseMap);
  if (uint64_t(src_w) * uint64_t(src_h) > max_pixels || int64_t{src_w} * src_h > INT32_MAX)
    throw SampleError("dense map of " + std::to_string(src_w) + "x" + std::to_string(src_h) +
                          " pixels is over --max-pixels " + std::to_string(max_pixels),
                      ErrorCode::BadDenseMap);
  const size_t pixel_bytes = dtype_size(v.dtype) * static_cast<size_t>(channels);
  const std::vector<uint8_t> warped =
      g.identity
          ? v.data
          : warp_dense_bytes(v.data, src_w, src_h, pixel_bytes, g.m, g.out_width, g.out_height);
  std::vector<int64_t> shape = {g.out_height, g.out_width};
  if (s.size() == 3) shape.push_back(channels);
  return format::encode_npy_blob(v.dtype, shape, warped);
}

}  // namespace tarmac
