#pragma once
// NumPy .npz archives: a zip of .npy arrays, one field per array.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "labels/field_value.h"

namespace tarmac {

/// One .npy entry of an .npz: its name without ".npy", and its bytes once inflated.
using NpzMember = std::pair<std::string, std::vector<uint8_t>>;

/// Returns every entry of the zip (stored, DEFLATE, ZIP64 as numpy writes), in zip order.
/// Throws ParseError for a damaged zip, an entry that is not a .npy, a repeated entry name, or
/// entries larger than max_bytes together once uncompressed (checked while inflating, so a zip
/// bomb stops there; the message names limit_flag, the option that raises it, when given).
std::vector<NpzMember> read_npz_members(std::span<const uint8_t> bytes, uint64_t max_bytes,
                                        std::string_view limit_flag = {});

/// Returns one field per array, named prefix + entry name without ".npy", in zip order.
/// Throws ParseError for a damaged zip, an entry that is not a .npy, a repeated entry name,
/// entries larger than max_bytes together once uncompressed, or any array parse_npy refuses.
Fields parse_npz(std::span<const uint8_t> bytes, std::string_view prefix, uint64_t max_bytes,
                 std::string_view limit_flag = {});

}  // namespace tarmac
