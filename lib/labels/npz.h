#pragma once
// NumPy .npz archives: a zip of .npy arrays, one field per array.
#include <cstdint>
#include <span>
#include <string_view>

#include "labels/field_value.h"

namespace tarmac {

/// Returns one field per array, named prefix + entry name without ".npy", in zip order.
/// Throws ParseError for a damaged zip, an entry that is not a .npy, a repeated entry name,
/// an entry larger than max_member_size once uncompressed, or any array parse_npy refuses.
Fields parse_npz(std::span<const uint8_t> bytes, std::string_view prefix, uint64_t max_member_size);

}  // namespace tarmac
