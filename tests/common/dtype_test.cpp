#include <catch2/catch.hpp>

#include "common/dtype.h"

using tarmac::DType;

TEST_CASE("dtype names round-trip and sizes match safetensors") {
  for (DType t : {DType::BOOL, DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32,
                  DType::U64, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    auto back = tarmac::dtype_from_name(tarmac::dtype_name(t));
    REQUIRE(back.has_value());
    CHECK(*back == t);
  }
  CHECK(tarmac::dtype_size(DType::F64) == 8);
  CHECK(tarmac::dtype_size(DType::BF16) == 2);
  CHECK(tarmac::dtype_size(DType::BOOL) == 1);
  CHECK_FALSE(tarmac::dtype_from_name("F128").has_value());
  CHECK_FALSE(tarmac::dtype_from_name("f32").has_value());
}
