#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/npy_blob.h"

using tarmac::DType;
using tarmac::ParseError;
using tarmac::format::encode_npy_blob;
using tarmac::format::parse_npy_blob;

namespace {

// What numpy.save writes for np.zeros((2, 3), '<f4') (format 1.0), typed out by hand.
std::vector<uint8_t> numpy_written(const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string text = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' +
                     header + std::string(data_bytes, '\0');
  return {text.begin(), text.end()};
}

}  // namespace

TEST_CASE("encode_npy_blob writes numpy's own header, the data on 64 bytes", "[npy_blob]") {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> shape = {2, 3};
  const auto b = encode_npy_blob(DType::F32, shape,
                                 {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
  // 10 bytes of preamble + 59 of dict + padding: the data starts at 128.
  REQUIRE(b.size() == 128 + 24);
  const std::string header(b.begin() + 10, b.begin() + 128);
  CHECK(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  CHECK(header.back() == '\n');
  auto expect = numpy_written("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0);
  expect.insert(expect.end(), b.begin() + 128, b.end());
  CHECK(b == expect);
  const auto a = parse_npy_blob(b);
  CHECK(a.dtype == DType::F32);
  CHECK(a.shape == shape);
  REQUIRE(a.data.size() == 24);
  CHECK(std::memcmp(a.data.data(), v.data(), 24) == 0);
}

TEST_CASE("parse_npy_blob reads numpy.save's bytes: every dtype, 2 or 3 dimensions", "[npy_blob]") {
  // numpy.save pads with extra spaces (room for the shape to grow): any count is accepted.
  auto grown = numpy_written(
      "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 5, 3), }" + std::string(21, ' '), 60);
  const auto a = parse_npy_blob(grown);
  CHECK(a.dtype == DType::U8);
  CHECK(a.shape == std::vector<int64_t>{4, 5, 3});
  for (const auto& [descr, dtype] :
       std::vector<std::pair<std::string, DType>>{{"|b1", DType::BOOL},
                                                  {"|i1", DType::I8},
                                                  {"<u2", DType::U16},
                                                  {"<i2", DType::I16},
                                                  {"<u4", DType::U32},
                                                  {"<i4", DType::I32},
                                                  {"<u8", DType::U64},
                                                  {"<i8", DType::I64},
                                                  {"<f2", DType::F16},
                                                  {"<f8", DType::F64}}) {
    const std::vector<int64_t> shape = {3, 2};
    const std::vector<uint8_t> zeros(6 * tarmac::dtype_size(dtype), 0);
    const auto e = encode_npy_blob(dtype, shape, zeros);
    CHECK(std::string(e.begin() + 10, e.begin() + 22) == "{'descr': '" + descr.substr(0, 1));
    CHECK(parse_npy_blob(e).dtype == dtype);
    CHECK(parse_npy_blob(
              numpy_written("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (3, 2), }",
                            zeros.size()))
              .dtype == dtype);
  }
}

TEST_CASE("parse_npy_blob refuses what tarmac does not store", "[npy_blob]") {
  auto refuses = [](const std::string& dict, size_t data, const std::string& says) {
    CHECK_THROWS_WITH(parse_npy_blob(numpy_written(dict, data)), Catch::Contains(says));
  };
  refuses("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "dtype '>f4'");
  refuses("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, "C order");
  refuses("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 24, "dimension");
  refuses("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3, 1), }", 24, "more than 3");
  refuses("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23, "need 24 bytes");
  refuses("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 25, "need 24 bytes");
  refuses("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", 48, "dtype '|O'");
  refuses("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 3), }", 0, "2^31");
  refuses(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483647, 2147483647, 2147483647), }",
      0, "need more");
  CHECK_THROWS_AS(parse_npy_blob(std::vector<uint8_t>{0x93, 'N', 'U'}), ParseError);
  auto v2 = numpy_written("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  v2[6] = 2;
  CHECK_THROWS_WITH(parse_npy_blob(v2), Catch::Contains("version 2.0"));
}
