// libFuzzer target: .npy dense maps, both ways. The converter's path (npy_dense_map: parse an
// untrusted .npy member, check it against an image size, warp it, write the stored blob) must
// return a blob that the reader's parser (parse_npy_blob) reads back with the output size, or
// throw ParseError / SampleError; and parse_npy_blob on the raw bytes (a stored blob as a
// reader meets it) must return an array inside them or throw ParseError.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "common/error.h"
#include "convert/npy_dense.h"
#include "format/npy_blob.h"
#include "labels/npy.h"
#include "transform/geometry.h"

namespace {
constexpr uint64_t kMaxPixels = 1 << 16;

void check_blob(const tarmac::format::NpyBlob& b, std::span<const uint8_t> in) {
  if (b.shape.size() < 2 || b.shape.size() > 3) __builtin_trap();
  if (b.data.size() &&
      (b.data.data() < in.data() || b.data.data() + b.data.size() > in.data() + in.size()))
    __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    check_blob(tarmac::format::parse_npy_blob(bytes), bytes);
  } catch (const tarmac::ParseError&) {
  }
  try {
    // The image size is the array's own (what a matching sample has), else the refusal.
    const tarmac::FieldValue v = tarmac::parse_npy(bytes);
    int w = 4, h = 3;
    if (v.shape.size() >= 2 && v.shape[0] > 0 && v.shape[1] > 0 && v.shape[0] <= 256 &&
        v.shape[1] <= 256) {
      h = static_cast<int>(v.shape[0]);
      w = static_cast<int>(v.shape[1]);
    }
    tarmac::GeometryOptions o;
    o.crop = tarmac::CropMode::Center;
    o.width = 5;
    o.height = 7;
    o.resize = tarmac::ResizeMode::Exact;
    const tarmac::Geometry g = tarmac::compute_geometry(o, w, h, std::nullopt);
    const std::vector<uint8_t> blob = tarmac::npy_dense_map(bytes, w, h, g, kMaxPixels);
    const tarmac::format::NpyBlob b = tarmac::format::parse_npy_blob(blob);
    check_blob(b, blob);
    if (b.shape[0] != g.out_height || b.shape[1] != g.out_width || b.dtype != v.dtype)
      __builtin_trap();
  } catch (const tarmac::ParseError&) {
  } catch (const tarmac::SampleError&) {
  }
  return 0;
}
