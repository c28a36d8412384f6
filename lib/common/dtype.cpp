#include "common/dtype.h"

#include <array>

namespace tarmac {
namespace {
struct Info {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<Info, 13> kInfo = {{{DType::BOOL, "BOOL", 1},
                                         {DType::U8, "U8", 1},
                                         {DType::I8, "I8", 1},
                                         {DType::U16, "U16", 2},
                                         {DType::I16, "I16", 2},
                                         {DType::U32, "U32", 4},
                                         {DType::I32, "I32", 4},
                                         {DType::U64, "U64", 8},
                                         {DType::I64, "I64", 8},
                                         {DType::F16, "F16", 2},
                                         {DType::BF16, "BF16", 2},
                                         {DType::F32, "F32", 4},
                                         {DType::F64, "F64", 8}}};
}  // namespace

size_t dtype_size(DType t) {
  return kInfo[static_cast<size_t>(t)].size;
}
std::string_view dtype_name(DType t) {
  return kInfo[static_cast<size_t>(t)].name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

bool dtype_is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
bool dtype_is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
bool dtype_is_unsigned_int(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}

}  // namespace tarmac
