#pragma once
// Element types of label columns; the names are safetensors' dtype names.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tarmac {

enum class DType : uint8_t { BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64 };

/// Size of one element in bytes.
size_t dtype_size(DType t);
/// The safetensors name ("F32", "I64", ...).
std::string_view dtype_name(DType t);
/// Parses a safetensors dtype name; nullopt for anything else.
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType t);
bool dtype_is_signed_int(DType t);
bool dtype_is_unsigned_int(DType t);

}  // namespace tarmac
