#pragma once
// A strict validating parser of safetensors headers: the container of the annotation file.
// format/layout.h reads tarmac's layout on top of it.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace tarmac {

/// One tensor of a safetensors file; begin/end are absolute byte offsets in the file.
struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// The parsed header of a safetensors file.
struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;
  std::vector<TensorInfo> tensors;  ///< Sorted by begin (then end, then name).
  uint64_t data_start = 0;          ///< Absolute offset of the data buffer: 8 + header length.

  /// Indices into `tensors` sorted by name (parse_safetensors fills it; empty otherwise).
  std::vector<uint32_t> by_name;

  /// The tensor called `name`, or nullptr; the pointer is valid while `tensors` is
  /// unchanged. A binary search when `by_name` indexes `tensors` (a header of 30 000 fields
  /// looked each up by a linear search: seconds), else linear.
  const TensorInfo* find(std::string_view name) const;
};

/// The largest header accepted, as in the reference implementation (huggingface/safetensors).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// Parses and validates the header of the safetensors file whose bytes are `file`.
/// Strict like the reference library: the tensors must tile the data buffer exactly
/// (no overlaps, holes or trailing bytes), and each tensor's byte range must match its
/// dtype and shape. Reads only the header (never the data buffer); linear in its size.
/// Throws ParseError with the reason (naming the tensor where there is one).
SafetensorsHeader parse_safetensors(std::span<const uint8_t> file);

}  // namespace tarmac
