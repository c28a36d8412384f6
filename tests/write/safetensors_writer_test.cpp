#include <catch2/catch.hpp>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"
#include "test_util.h"
#include "write/safetensors_writer.h"

using tarmac::DType;
using tarmac::TensorSpec;
using tarmac::test::read_all;
using tarmac::test::run;
using tarmac::test::shell_quote;
using tarmac::test::TempDir;

namespace {

template <typename T>
std::function<void(tarmac::ByteSink&)> fill_with(std::vector<T> values) {
  return [values = std::move(values)](tarmac::ByteSink& sink) {
    // Uneven pieces, to exercise the sink's buffering.
    const auto* p = reinterpret_cast<const uint8_t*>(values.data());
    const size_t total = values.size() * sizeof(T);
    for (size_t off = 0, piece = 1; off < total; off += piece, piece = piece * 2 + 1)
      sink.write({p + off, std::min(piece, total - off)});
  };
}

std::vector<TensorSpec> sample_tensors() {
  std::vector<TensorSpec> t;
  t.push_back({"f64", DType::F64, {2, 3}, fill_with<double>({0.5, -1.25, 3.0, 1e100, -0.0, 42.0})});
  t.push_back({"f32", DType::F32, {3}, fill_with<float>({1.5f, -2.25f, 1024.0f})});
  t.push_back({"i64", DType::I64, {2}, fill_with<int64_t>({-9000000000000000000, 7})});
  t.push_back({"u8", DType::U8, {5}, fill_with<uint8_t>({0, 1, 127, 128, 255})});
  t.push_back(
      {"i32", DType::I32, {2, 2}, fill_with<int32_t>({-1, 2, -2147483647 - 1, 2147483647})});
  t.push_back({"bool", DType::BOOL, {3}, fill_with<uint8_t>({1, 0, 1})});
  t.push_back({"empty", DType::U16, {0, 4}, fill_with<uint16_t>({})});
  t.push_back({"a_scalar", DType::I64, {}, fill_with<int64_t>({-5})});
  return t;
}

const std::map<std::string, std::string> kMetadata = {{"format", "tarmac"},
                                                      {"note", "caf\xc3\xa9"}};

}  // namespace

TEST_CASE("safetensors: round trip through the parser, sorted and aligned") {
  TempDir dir;
  const std::string path = dir.file("labels.safetensors");
  tarmac::write_safetensors(path, sample_tensors(), kMetadata);

  tarmac::MappedFile file(path);
  const auto h = tarmac::parse_safetensors(file.bytes());
  CHECK(h.metadata == kMetadata);
  CHECK(h.data_start % 8 == 0);
  std::vector<std::string> order;
  for (const auto& t : h.tensors) {
    order.push_back(t.name);
    CHECK(t.begin % tarmac::dtype_size(t.dtype) == 0);
  }
  // Element size descending, ties by name; the zero-size U16 tensor sits between.
  CHECK(order ==
        std::vector<std::string>{"a_scalar", "f64", "i64", "f32", "i32", "empty", "bool", "u8"});

  const auto* f64 = h.find("f64");
  REQUIRE(f64 != nullptr);
  CHECK(f64->dtype == DType::F64);
  CHECK(f64->shape == std::vector<int64_t>{2, 3});
  double d[6];
  std::memcpy(d, file.bytes().data() + f64->begin, sizeof d);
  CHECK(d[3] == 1e100);
  const auto* empty = h.find("empty");
  REQUIRE(empty != nullptr);
  CHECK(empty->begin == empty->end);
  CHECK(empty->shape == std::vector<int64_t>{0, 4});
  CHECK(h.find("a_scalar")->shape.empty());
  CHECK(h.find("nope") == nullptr);

  // The header text starts with __metadata__ and is padded with spaces.
  const auto bytes = read_all(path);
  const std::string header(bytes.begin() + 8, bytes.begin() + static_cast<ptrdiff_t>(h.data_start));
  CHECK_THAT(header, Catch::StartsWith("{\"__metadata__\":{\"format\":\"tarmac\""));
  CHECK(header.find_last_not_of(' ') == header.find_last_of('}'));
}

TEST_CASE("safetensors: numpy reading from the spec agrees") {
  TempDir dir;
  const std::string path = dir.file("labels.safetensors");
  tarmac::write_safetensors(path, sample_tensors(), kMetadata);
  // A strict reader written from the format spec alone.
  const std::string script = R"PY(
import sys, json, struct
import numpy as np
raw = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
assert (8 + n) % 8 == 0
header = json.loads(raw[8:8 + n].decode('utf-8'))
assert list(header)[0] == '__metadata__'
meta = header.pop('__metadata__')
data = raw[8 + n:]
types = {'F64': '<f8', 'F32': '<f4', 'I64': '<i8', 'I32': '<i4', 'U8': 'u1', 'U16': '<u2', 'BOOL': '?'}
pos = 0
for name, e in sorted(header.items(), key=lambda kv: kv[1]['data_offsets']):
    assert set(e) == {'dtype', 'shape', 'data_offsets'}
    b, end = e['data_offsets']
    assert b == pos, (name, b, pos)
    dt = np.dtype(types[e['dtype']])
    assert (8 + n + b) % dt.itemsize == 0
    a = np.frombuffer(data[b:end], dtype=dt).reshape(e['shape'])
    pos = end
    print(name, list(a.shape), ' '.join(repr(x) for x in a.flatten().tolist()))
assert pos == len(data)
print(json.dumps(meta, sort_keys=True, ensure_ascii=True))
)PY";
  const auto [rc, out] = run("/usr/bin/python3 -c " + shell_quote(script) + " " + path);
  REQUIRE(rc == 0);
  CHECK(out ==
        "a_scalar [] -5\n"
        "f64 [2, 3] 0.5 -1.25 3.0 1e+100 -0.0 42.0\n"
        "i64 [2] -9000000000000000000 7\n"
        "f32 [3] 1.5 -2.25 1024.0\n"
        "i32 [2, 2] -1 2 -2147483648 2147483647\n"
        "empty [0, 4] \n"
        "bool [3] True False True\n"
        "u8 [5] 0 1 127 128 255\n"
        "{\"format\": \"tarmac\", \"note\": \"caf\\u00e9\"}\n");
}

TEST_CASE("safetensors: tensors larger than the write buffer stream through") {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  const size_t n = (3u << 20) + 17;
  std::vector<uint8_t> big(n);
  for (size_t i = 0; i < n; ++i) big[i] = static_cast<uint8_t>(i * 7);
  std::vector<TensorSpec> specs;
  specs.push_back({"big", DType::U8, {static_cast<int64_t>(n)}, [&](tarmac::ByteSink& s) {
                     s.write({big.data(), 100});
                     s.write({big.data() + 100, n - 100});  // larger than the buffer
                   }});
  specs.push_back({"small", DType::F32, {1}, fill_with<float>({2.0f})});
  tarmac::write_safetensors(path, specs, {});
  tarmac::MappedFile file(path);
  const auto h = tarmac::parse_safetensors(file.bytes());
  const auto* t = h.find("big");
  REQUIRE(t != nullptr);
  CHECK(
      std::equal(big.begin(), big.end(), file.bytes().begin() + static_cast<ptrdiff_t>(t->begin)));
  CHECK(h.metadata.empty());
}

TEST_CASE("safetensors: no tensors at all is a valid file") {
  TempDir dir;
  const std::string path = dir.file("none.safetensors");
  tarmac::write_safetensors(path, {}, {});
  tarmac::MappedFile file(path);
  const auto h = tarmac::parse_safetensors(file.bytes());
  CHECK(h.tensors.empty());
  CHECK(h.data_start == file.bytes().size());
}

TEST_CASE(
    "safetensors: a fill writing the wrong byte count is an InternalError naming the tensor") {
  TempDir dir;
  std::vector<TensorSpec> short_fill;
  short_fill.push_back({"labels/short", DType::F32, {2}, fill_with<float>({1.0f})});
  try {
    tarmac::write_safetensors(dir.file("a"), short_fill, {});
    FAIL("expected InternalError");
  } catch (const tarmac::InternalError& e) {
    CHECK_THAT(e.what(), Catch::Contains("labels/short") && Catch::Contains("4 bytes") &&
                             Catch::Contains("need 8"));
  }
  std::vector<TensorSpec> long_fill;
  long_fill.push_back({"labels/long", DType::U8, {1}, fill_with<uint8_t>({1, 2})});
  CHECK_THROWS_WITH(tarmac::write_safetensors(dir.file("b"), long_fill, {}),
                    Catch::Contains("labels/long"));
}

TEST_CASE("safetensors: bad specs are refused before anything is written") {
  TempDir dir;
  auto one = [](std::string name, std::vector<int64_t> shape) {
    std::vector<TensorSpec> v;
    v.push_back({std::move(name), DType::U8, std::move(shape), fill_with<uint8_t>({})});
    return v;
  };
  CHECK_THROWS_AS(tarmac::write_safetensors(dir.file("a"), one("x", {-1}), {}),
                  tarmac::InternalError);
  CHECK_THROWS_AS(tarmac::write_safetensors(dir.file("a"), one("__metadata__", {0}), {}),
                  tarmac::InternalError);
  CHECK_THROWS_AS(
      tarmac::write_safetensors(dir.file("a"), one("x", {1 << 30, 1 << 30, 1 << 30}), {}),
      tarmac::InternalError);
  CHECK_THROWS_AS(tarmac::write_safetensors(dir.file("a"), one("bad\xff", {0}), {}),
                  tarmac::InternalError);
  auto dup = one("x", {0});
  dup.push_back(dup.front());
  CHECK_THROWS_WITH(tarmac::write_safetensors(dir.file("a"), dup, {}), Catch::Contains("'x'"));
}

TEST_CASE("safetensors: an unwritable path is a FatalError naming it") {
  TempDir dir;
  const std::string path = dir.file("missing/labels.safetensors");
  CHECK_THROWS_WITH(tarmac::write_safetensors(path, sample_tensors(), {}), Catch::Contains(path));
  CHECK_THROWS_AS(tarmac::write_safetensors(path, sample_tensors(), {}), tarmac::FatalError);
}
