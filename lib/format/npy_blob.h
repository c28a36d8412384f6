#pragma once
// Dense maps stored as .npy (the `npy` stored encoding, docs/format.md 1.3): the one writer of
// such a blob and the one parser of it, used by convert, the reader and verify. The stored
// form is NumPy's own format 1.0 in one canonical shape: little-endian dtype, C order, the
// header padded so that the data starts at a multiple of 64 bytes.
#include <cstdint>
#include <span>
#include <vector>

#include "common/dtype.h"

namespace tarmac::format {

/// The most dimensions a stored .npy dense map has: H x W or H x W x C.
inline constexpr size_t kMaxNpyBlobDims = 3;

/// A stored .npy array: dtype, shape (H, W) or (H, W, C), and its element bytes, which point
/// into the parsed span and are valid as long as it is.
struct NpyBlob {
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
};

/// The .npy bytes of `data` (little-endian elements, C order) with `shape`. dtype must not be
/// BF16 (numpy has no such type); data.size() must be product(shape) x the element size.
std::vector<uint8_t> encode_npy_blob(DType dtype, std::span<const int64_t> shape,
                                     std::span<const uint8_t> data);

/// Parses a stored blob in the canonical form encode_npy_blob writes (which is also what
/// numpy.save writes for such an array). Throws ParseError for anything else: another
/// version, byte order or dtype, Fortran order, a shape of other than 2 or 3 dimensions, data
/// of another length.
NpyBlob parse_npy_blob(std::span<const uint8_t> bytes);

}  // namespace tarmac::format
