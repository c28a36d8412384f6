// dtype promotion (format/field_spec.h): the rules of docs/format.md 1.4, checked against the
// ranges of the types (an integer type's values must fit the result exactly).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "format/field_spec.h"

using tarmac::DType;
using tarmac::promote;

namespace {

const DType kAll[] = {DType::BOOL, DType::U8,  DType::I8,  DType::U16, DType::I16,
                      DType::U32,  DType::I32, DType::U64, DType::I64, DType::F16,
                      DType::BF16, DType::F32, DType::F64};

bool is_int(DType t) {
  return tarmac::dtype_is_signed_int(t) || tarmac::dtype_is_unsigned_int(t);
}

// Value ranges of the integer types, as long double (exact for 64-bit bounds).
long double lo(DType t) {
  switch (t) {
    case DType::I8:
      return -128.0L;
    case DType::I16:
      return -32768.0L;
    case DType::I32:
      return -2147483648.0L;
    case DType::I64:
      return -9223372036854775808.0L;
    default:
      return 0;
  }
}
long double hi(DType t) {
  switch (t) {
    case DType::BOOL:
      return 1;
    case DType::U8:
      return 255;
    case DType::I8:
      return 127;
    case DType::U16:
      return 65535;
    case DType::I16:
      return 32767;
    case DType::U32:
      return 4294967295.0L;
    case DType::I32:
      return 2147483647.0L;
    case DType::U64:
      return 18446744073709551615.0L;
    case DType::I64:
      return 9223372036854775807.0L;
    default:
      return 0;
  }
}
// Significand bits of the float types: the integers they hold exactly reach 2^bits.
int significand(DType t) {
  switch (t) {
    case DType::F16:
      return 11;
    case DType::BF16:
      return 8;
    case DType::F32:
      return 24;
    case DType::F64:
      return 53;
    default:
      return 0;
  }
}

}  // namespace

TEST_CASE("promote: the examples of the format") {
  CHECK(promote(DType::U8, DType::I8) == DType::I16);
  CHECK(promote(DType::I64, DType::F32) == DType::F64);
  CHECK(promote(DType::F16, DType::BF16) == DType::F32);
  CHECK(promote(DType::U64, DType::I64) == DType::F64);
  CHECK(promote(DType::BOOL, DType::I64) == DType::I64);
  CHECK(promote(DType::BOOL, DType::F64) == DType::F64);
  CHECK(promote(DType::I64, DType::F64) == DType::F64);
  CHECK(promote(DType::U16, DType::I16) == DType::I32);
  CHECK(promote(DType::U32, DType::I32) == DType::I64);
  CHECK(promote(DType::U16, DType::I32) == DType::I32);
  CHECK(promote(DType::U8, DType::U32) == DType::U32);
  CHECK(promote(DType::I16, DType::F32) == DType::F32);
  CHECK(promote(DType::I32, DType::F32) == DType::F64);
  CHECK(promote(DType::F16, DType::F32) == DType::F32);
  CHECK(promote(DType::BF16, DType::F64) == DType::F64);
}

TEST_CASE("promote: symmetric, idempotent, BOOL is the identity") {
  for (DType a : kAll) {
    CHECK(promote(a, a) == a);
    CHECK(promote(DType::BOOL, a) == a);
    for (DType b : kAll) {
      INFO(tarmac::dtype_name(a) << " " << tarmac::dtype_name(b));
      CHECK(promote(a, b) == promote(b, a));
    }
  }
}

TEST_CASE("promote: two integers give the smallest integer holding both, else F64") {
  const DType ints[] = {DType::U8,  DType::I8,  DType::U16, DType::I16,
                        DType::U32, DType::I32, DType::U64, DType::I64};
  for (DType a : ints)
    for (DType b : ints) {
      INFO(tarmac::dtype_name(a) << " " << tarmac::dtype_name(b));
      DType want = DType::F64;
      size_t best = 99;
      for (DType c : ints)
        if (lo(c) <= std::min(lo(a), lo(b)) && hi(c) >= std::max(hi(a), hi(b)) &&
            tarmac::dtype_size(c) < best) {
          best = tarmac::dtype_size(c);
          want = c;
        }
      CHECK(promote(a, b) == want);
    }
}

TEST_CASE("promote: an integer with a float gives a float at least as wide that holds it") {
  for (DType i : kAll) {
    if (!is_int(i)) continue;
    for (DType f : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
      INFO(tarmac::dtype_name(i) << " " << tarmac::dtype_name(f));
      const DType r = promote(i, f);
      REQUIRE(tarmac::dtype_is_float(r));
      CHECK(tarmac::dtype_size(r) >= tarmac::dtype_size(f));
      const long double limit = std::ldexp(1.0L, significand(r));
      // Exact for every integer of the type, unless none but F64 comes close (64-bit ints).
      if (tarmac::dtype_size(i) < 8) {
        CHECK(hi(i) <= limit);
        CHECK(-lo(i) <= limit);
      } else {
        CHECK(r == DType::F64);
      }
    }
  }
}
