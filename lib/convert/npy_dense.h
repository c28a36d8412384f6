#pragma once
// Dense maps given as .npy members (`--dense depth.npy`): warped with the image by nearest
// neighbour, values never converted, stored as a canonical .npy (format/npy_blob.h).
#include <cstdint>
#include <span>
#include <vector>

#include "transform/geometry.h"

namespace tarmac {

/// The stored blob of a .npy dense map: `npy` (untrusted member bytes) must hold a numeric
/// H x W or H x W x C array, any dtype and byte order, C or Fortran order, with H x W the
/// image's src_h x src_w; it is warped by g (outside the source: zero bytes) and written as a
/// little-endian C-order .npy of shape (out_h, out_w[, C]) with its dtype. Throws ParseError
/// for a malformed .npy, SampleError (BadDenseMap) for the wrong kind, shape or size.
std::vector<uint8_t> npy_dense_map(std::span<const uint8_t> npy, int src_w, int src_h,
                                   const Geometry& g, uint64_t max_pixels);

}  // namespace tarmac
