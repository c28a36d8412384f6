#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/npy.h"
#include "support/values.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::FieldValue;
using tarmac::ParseError;
using tarmac::test::text_of;
using tarmac::test::values_of;

namespace {

using Bytes = std::vector<uint8_t>;

// A .npy file of the given version with `dict` as its header text, padded as NumPy pads it.
Bytes npy(const std::string& dict, const Bytes& data, int version = 1) {
  const size_t preamble = version == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(version), 0};
  const size_t len = header.size();
  out.push_back(static_cast<uint8_t>(len));
  out.push_back(static_cast<uint8_t>(len >> 8));
  if (version != 1) {
    out.push_back(static_cast<uint8_t>(len >> 16));
    out.push_back(static_cast<uint8_t>(len >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

template <typename T>
Bytes le_bytes(std::initializer_list<T> values) {
  Bytes out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

Bytes utf32(std::u32string s, size_t units) {
  s.resize(units, U'\0');
  Bytes out(units * 4);
  std::memcpy(out.data(), s.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("npy: little-endian numeric dtypes keep their type and bytes") {
  struct Case {
    std::string descr;
    DType dtype;
    size_t size;
  };
  for (const Case& c :
       {Case{"<i1", DType::I8, 1}, Case{"|u1", DType::U8, 1}, Case{"<i2", DType::I16, 2},
        Case{"<u2", DType::U16, 2}, Case{"<i4", DType::I32, 4}, Case{"<u4", DType::U32, 4},
        Case{"<i8", DType::I64, 8}, Case{"<u8", DType::U64, 8}, Case{"<f2", DType::F16, 2},
        Case{"<f4", DType::F32, 4}, Case{"<f8", DType::F64, 8}, Case{"=i4", DType::I32, 4},
        Case{"|i1", DType::I8, 1}}) {
    INFO(c.descr);
    Bytes data(3 * c.size);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i + 1);
    const FieldValue v = tarmac::parse_npy(npy(dict(c.descr, "(3,)"), data));
    CHECK(v.kind == FieldValue::Kind::Numeric);
    CHECK(v.dtype == c.dtype);
    CHECK(v.shape == std::vector<int64_t>{3});
    CHECK(v.data == data);
  }
}

TEST_CASE("npy: bool arrays become BOOL with 0/1 bytes") {
  const FieldValue v = tarmac::parse_npy(npy(dict("|b1", "(2, 2)"), {1, 0, 0, 7}));
  CHECK(v.dtype == DType::BOOL);
  CHECK(v.shape == std::vector<int64_t>{2, 2});
  CHECK(v.data == Bytes{1, 0, 0, 1});
}

TEST_CASE("npy: big-endian elements are byte-swapped to little-endian") {
  const FieldValue v =
      tarmac::parse_npy(npy(dict(">i4", "(2,)"), {0x01, 0x02, 0x03, 0x04, 0xFF, 0xFF, 0xFF, 0xFE}));
  CHECK(v.dtype == DType::I32);
  CHECK(values_of<int32_t>(v) == std::vector<int32_t>{0x01020304, -2});
  const FieldValue h = tarmac::parse_npy(npy(dict(">f2", "()"), {0x3C, 0x00}));
  CHECK(h.dtype == DType::F16);
  CHECK(h.data == Bytes{0x00, 0x3C});
}

TEST_CASE("npy: 0-d arrays have an empty shape") {
  const FieldValue v = tarmac::parse_npy(npy(dict("<i8", "()"), le_bytes<int64_t>({42})));
  CHECK(v.shape.empty());
  CHECK(values_of<int64_t>(v) == std::vector<int64_t>{42});
}

TEST_CASE("npy: fortran_order arrays are transposed to C order") {
  // Logical [[1,2,3],[4,5,6]] stored column-major.
  const FieldValue v =
      tarmac::parse_npy(npy(dict("<i2", "(2, 3)", true), le_bytes<int16_t>({1, 4, 2, 5, 3, 6})));
  CHECK(v.shape == std::vector<int64_t>{2, 3});
  CHECK(values_of<int16_t>(v) == std::vector<int16_t>{1, 2, 3, 4, 5, 6});

  // 3-d: element (i,j,k) of shape (2,3,2) holds 100*i + 10*j + k.
  std::vector<int32_t> fortran;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) fortran.push_back(100 * i + 10 * j + k);
  Bytes data(fortran.size() * 4);
  std::memcpy(data.data(), fortran.data(), data.size());
  const FieldValue w = tarmac::parse_npy(npy(dict(">i4", "(2, 3, 2)", true), [&] {
    Bytes be = data;
    for (size_t i = 0; i < be.size(); i += 4) std::reverse(be.begin() + i, be.begin() + i + 4);
    return be;
  }()));
  std::vector<int32_t> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) expected.push_back(100 * i + 10 * j + k);
  CHECK(values_of<int32_t>(w) == expected);
}

TEST_CASE("npy: versions 2.0 and 3.0 use a 4-byte header length") {
  for (int version : {2, 3}) {
    const FieldValue v =
        tarmac::parse_npy(npy(dict("<f8", "(1,)"), le_bytes<double>({2.5}), version));
    CHECK(values_of<double>(v) == std::vector<double>{2.5});
  }
}

TEST_CASE("npy: header dict literal variants NumPy accepts") {
  const Bytes one = le_bytes<int64_t>({7});
  CHECK(
      tarmac::parse_npy(npy("{\"shape\": (1,), \"fortran_order\": False, \"descr\": \"<i8\"}", one))
          .shape == std::vector<int64_t>{1});
  CHECK(tarmac::parse_npy(npy("{'descr':'<i8','fortran_order':False,'shape':(1L,)}", one)).shape ==
        std::vector<int64_t>{1});
  CHECK(
      tarmac::parse_npy(npy("  {'descr': '<i8',\n 'fortran_order': False, 'shape': ( 1 , ) }", one))
          .shape == std::vector<int64_t>{1});
}

TEST_CASE("npy: malformed header dicts are refused") {
  const Bytes one = le_bytes<int64_t>({7});
  for (const std::string bad : {
           "{'descr': '<i8', 'fortran_order': False, 'shape': (1)}",  // (1) is an int, not a tuple
           "{'descr': '<i8', 'fortran_order': False}",                // missing shape
           "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), 'x': 1}",  // extra key
           "{'descr': '<i8', 'descr': '<i8', 'fortran_order': False, 'shape': (1,)}",
           "{'descr': '<i8', 'fortran_order': 0, 'shape': (1,)}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': (1,)} x",
           "{'descr': '<i8', 'fortran_order': False, 'shape': (-1,)}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': (1.0,)}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': ('1',)}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': [1]}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': (1,,)}",
           "{'descr': '<i\\x38', 'fortran_order': False, 'shape': (1,)}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': __import__('os')}",
           "{'descr': '<i8', 'fortran_order': False, 'shape': (1,)",
           "{1: '<i8'}",
           "",
           "{'descr': '<i8', 'fortran_order': False, 'shape': (((((((((((1,),),),),),),),),),),)}",
       }) {
    INFO(bad);
    CHECK_THROWS_AS(tarmac::parse_npy(npy(bad, one)), ParseError);
  }
}

TEST_CASE("npy: unsupported dtypes are refused with the reason") {
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("|O", "(1,)"), Bytes(8))),
                    Contains("never unpickles"));
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<c8", "(1,)"), Bytes(8))), Contains("complex"));
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<M8[ns]", "(1,)"), Bytes(8))),
                    Contains("datetime"));
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<m8[s]", "(1,)"), Bytes(8))), Contains("datetime"));
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("|V8", "(1,)"), Bytes(8))), Contains("structured"));
  CHECK_THROWS_WITH(
      tarmac::parse_npy(
          npy("{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (1,), }",
              Bytes(8))),
      Contains("structured"));
  for (const std::string descr :
       {"<f16", "<i3", "<f1", "|b2", "<x4", "<", "", "<U", "<U0", "|S0", "<i4 "}) {
    INFO(descr);
    CHECK_THROWS_AS(tarmac::parse_npy(npy(dict(descr, "(1,)"), Bytes(4))), ParseError);
  }
}

TEST_CASE("npy: data length must match the shape exactly") {
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f4", "(2, 3)"), Bytes(23))),
                    Contains("truncated"));
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f4", "(2, 3)"), Bytes(25))),
                    Contains("after the array data"));
  CHECK(tarmac::parse_npy(npy(dict("<f4", "(2, 3)"), Bytes(24))).data.size() == 24);
}

TEST_CASE("npy: empty arrays") {
  const FieldValue v = tarmac::parse_npy(npy(dict("<f4", "(0, 5)"), {}));
  CHECK(v.shape == std::vector<int64_t>{0, 5});
  CHECK(v.data.empty());
  const FieldValue s = tarmac::parse_npy(npy(dict("<U3", "(2, 0)"), {}));
  CHECK(s.kind == FieldValue::Kind::Json);
  CHECK(text_of(s) == "[[],[]]");
}

TEST_CASE("npy: hostile preambles and shapes are refused without allocating") {
  CHECK_THROWS_AS(tarmac::parse_npy(Bytes{}), ParseError);
  CHECK_THROWS_AS(tarmac::parse_npy(Bytes{0x93, 'N', 'U', 'M'}), ParseError);
  CHECK_THROWS_WITH(tarmac::parse_npy(Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0}),
                    Contains("preamble"));
  CHECK_THROWS_WITH(tarmac::parse_npy(Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 5, 0, 0}),
                    Contains("preamble"));
  CHECK_THROWS_WITH(tarmac::parse_npy(Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 4, 0, 0, 0}),
                    Contains("version 4.0"));
  CHECK_THROWS_WITH(tarmac::parse_npy(Bytes{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0}),
                    Contains("not a .npy"));

  SECTION("header_len beyond the buffer") {
    Bytes b = npy(dict("<f4", "(1,)"), Bytes(4));
    b[8] = 0xFF;
    b[9] = 0xFF;
    CHECK_THROWS_WITH(tarmac::parse_npy(b), Contains("header is truncated"));
    Bytes v2 = npy(dict("<f4", "(1,)"), Bytes(4), 2);
    v2[11] = 0xFF;
    CHECK_THROWS_WITH(tarmac::parse_npy(v2), Contains("header is truncated"));
  }
  SECTION("truncated header") {
    Bytes b = npy(dict("<f4", "(1,)"), Bytes(4));
    b.resize(40);
    CHECK_THROWS_AS(tarmac::parse_npy(b), ParseError);
  }
  SECTION("shape products that overflow") {
    CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f8", "(4294967296, 4294967296)"), Bytes(8))),
                      Contains("more elements than can be counted"));
    CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f8", "(4611686018427387904, 4)"), Bytes(8))),
                      Contains("more elements than can be counted"));
    CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f8", "(2305843009213693952,)"), Bytes(8))),
                      Contains("too large"));
    CHECK_THROWS_AS(tarmac::parse_npy(npy(dict("<f8", "(99999999999999999999,)"), Bytes(8))),
                    ParseError);
    CHECK_THROWS_AS(tarmac::parse_npy(npy(dict("<f8", "(9223372036854775808,)"), Bytes(8))),
                    ParseError);
    CHECK_THROWS_AS(tarmac::parse_npy(npy(dict("<U1000000000", "(1000000000,)"), Bytes(8))),
                    ParseError);
  }
  SECTION("huge declared shapes with tiny data") {
    CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f4", "(100000, 100000)"), Bytes(16))),
                      Contains("truncated"));
    CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<U3", "(1000000000000, 0)"), {})),
                      Contains("too large"));
  }
  SECTION("too many dimensions") {
    std::string shape = "(";
    for (int i = 0; i < 65; ++i) shape += "1, ";
    CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<f4", shape + ")"), Bytes(4))),
                      Contains("dimensions"));
  }
}

TEST_CASE("npy: a one-element unicode array becomes a String") {
  const FieldValue v =
      tarmac::parse_npy(npy(dict("<U5", "()"), utf32(U"h\u00e9\u20ac\U0001F600", 5)));
  CHECK(v.kind == FieldValue::Kind::String);
  CHECK(v.dtype == DType::U8);
  CHECK(text_of(v) == "h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  CHECK(v.shape == std::vector<int64_t>{static_cast<int64_t>(v.data.size())});

  Bytes be = utf32(U"ab", 3);
  for (size_t i = 0; i < be.size(); i += 4) std::reverse(be.begin() + i, be.begin() + i + 4);
  CHECK(text_of(tarmac::parse_npy(npy(dict(">U3", "(1,)"), be))) == "ab");
}

TEST_CASE("npy: a unicode array with several elements becomes a JSON list following the shape") {
  const Bytes elems = [] {
    Bytes out;
    for (const std::u32string& s : {std::u32string(U"a"), std::u32string(U"b\""),
                                    std::u32string(U""), std::u32string(U"\u00e9")}) {
      const Bytes b = utf32(s, 2);
      out.insert(out.end(), b.begin(), b.end());
    }
    return out;
  }();
  const FieldValue v = tarmac::parse_npy(npy(dict("<U2", "(2, 2)"), elems));
  CHECK(v.kind == FieldValue::Kind::Json);
  CHECK(text_of(v) == "[[\"a\",\"b\\\"\"],[\"\",\"\xC3\xA9\"]]");
  const FieldValue f = tarmac::parse_npy(npy(dict("<U2", "(2, 2)", true), elems));
  CHECK(text_of(f) == "[[\"a\",\"\"],[\"b\\\"\",\"\xC3\xA9\"]]");
}

TEST_CASE("npy: bytes arrays are treated like unicode and must be UTF-8") {
  CHECK(text_of(tarmac::parse_npy(npy(dict("|S4", "()"), {'c', 'a', 't', 0}))) == "cat");
  const FieldValue list = tarmac::parse_npy(npy(dict("|S2", "(2,)"), {'x', 0, 0xC3, 0xA9}));
  CHECK(list.kind == FieldValue::Kind::Json);
  CHECK(text_of(list) == "[\"x\",\"\xC3\xA9\"]");
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("|S2", "()"), {0xC3, 0x28})), Contains("UTF-8"));
}

TEST_CASE("npy: invalid code points are refused") {
  const Bytes surrogate = le_bytes<uint32_t>({0xD800});
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<U1", "()"), surrogate)), Contains("U+D800"));
  CHECK_THROWS_WITH(tarmac::parse_npy(npy(dict("<U1", "()"), le_bytes<uint32_t>({0x110000}))),
                    Contains("U+110000"));
}

TEST_CASE("npy fixtures written by numpy") {
  SECTION("float32 [2,3]") {
    const FieldValue v = tarmac::parse_npy(tarmac::test::read_fixture("labels/f32_2x3.npy"));
    CHECK(v.dtype == DType::F32);
    CHECK(v.shape == std::vector<int64_t>{2, 3});
    CHECK(values_of<float>(v) == std::vector<float>{1.5f, -2.0f, 3.25f, 4.0f, 0.0f, -0.125f});
  }
  SECTION("big-endian >f8") {
    const FieldValue v = tarmac::parse_npy(tarmac::test::read_fixture("labels/f8_big_endian.npy"));
    CHECK(v.dtype == DType::F64);
    CHECK(values_of<double>(v) == std::vector<double>{1.0, -2.5, 1e300});
  }
  SECTION("fortran-order int32 [2,3]") {
    const FieldValue v = tarmac::parse_npy(tarmac::test::read_fixture("labels/i4_fortran_2x3.npy"));
    CHECK(v.shape == std::vector<int64_t>{2, 3});
    CHECK(values_of<int32_t>(v) == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  }
  SECTION("<U5 scalar") {
    const FieldValue v = tarmac::parse_npy(tarmac::test::read_fixture("labels/u5_scalar.npy"));
    CHECK(v.kind == FieldValue::Kind::String);
    CHECK(text_of(v) == "h\xC3\xA9llo");
  }
  SECTION("<U3 [2,2]") {
    const FieldValue v = tarmac::parse_npy(tarmac::test::read_fixture("labels/u_list.npy"));
    CHECK(v.kind == FieldValue::Kind::Json);
    CHECK(text_of(v) == "[[\"a\",\"bc\"],[\"d\\\"e\",\"\xE2\x82\xAC\"]]");
  }
  SECTION("bool [3]") {
    const FieldValue v = tarmac::parse_npy(tarmac::test::read_fixture("labels/bool_3.npy"));
    CHECK(v.dtype == DType::BOOL);
    CHECK(v.data == Bytes{1, 0, 1});
  }
  SECTION("object array saved with allow_pickle") {
    CHECK_THROWS_WITH(tarmac::parse_npy(tarmac::test::read_fixture("labels/object.npy")),
                      Contains("never unpickles"));
  }
}
