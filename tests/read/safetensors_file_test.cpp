#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/safetensors.h"

using tarmac::DType;
using tarmac::parse_safetensors;
using tarmac::ParseError;

namespace {

// A file: the u64 LE length of `header` (or `length` when given), `header`, then `data_size` bytes.
std::vector<uint8_t> make_file(const std::string& header, size_t data_size = 0,
                               std::optional<uint64_t> length = std::nullopt) {
  std::vector<uint8_t> out(8);
  out.reserve(8 + header.size() + data_size);
  const uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_size; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}

std::string parse_error(const std::vector<uint8_t>& file) {
  try {
    parse_safetensors(file);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("parse_safetensors reads a hand-written file") {
  const std::string header =
      R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[16,19]},"z":{"dtype":"I64","shape":[0],"data_offsets":[19,19]}})";
  const auto file = make_file(header, 19);
  const auto h = parse_safetensors(file);
  CHECK(h.data_start == 8 + header.size());
  CHECK(h.metadata == std::map<std::string, std::string>{{"k", "v"}});
  REQUIRE(h.tensors.size() == 3);
  CHECK(h.tensors[0].name == "w");
  CHECK(h.tensors[0].dtype == DType::F32);
  CHECK(h.tensors[0].shape == std::vector<int64_t>{2, 2});
  CHECK(h.tensors[0].begin == h.data_start);
  CHECK(h.tensors[0].end == h.data_start + 16);
  CHECK(h.tensors[1].name == "b");
  CHECK(h.tensors[2].name == "z");
  CHECK(h.tensors[2].begin == h.tensors[2].end);
  REQUIRE(h.find("b") != nullptr);
  CHECK(h.find("b")->end == file.size());
  CHECK(h.find("missing") == nullptr);
}

TEST_CASE("parse_safetensors accepts an empty header object, space padding and no metadata") {
  CHECK(parse_safetensors(make_file("{}")).tensors.empty());
  CHECK(parse_safetensors(make_file("{}      ")).data_start == 16);
  CHECK(parse_safetensors(make_file(R"({"a":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}})", 1))
            .tensors.size() == 1);
}

TEST_CASE("parse_safetensors refuses broken framing") {
  CHECK_THAT(parse_error({}), Catch::Contains("shorter than the 8-byte"));
  CHECK_THAT(parse_error({1, 0, 0}), Catch::Contains("3 bytes"));
  CHECK_THAT(parse_error(make_file("{}", 0, 3)), Catch::Contains("exceeds the 2 bytes"));
  CHECK_THAT(parse_error(make_file("{}", 0, ~uint64_t{0})), Catch::Contains("exceeds the limit"));
  CHECK_THAT(parse_error(make_file("{}", 0, 100'000'001)), Catch::Contains("exceeds the limit"));
  CHECK_THAT(parse_error(make_file("", 0)), Catch::Contains("not valid JSON"));
}

TEST_CASE("parse_safetensors refuses headers that are not a JSON object of the right shape") {
  CHECK_THAT(parse_error(make_file("{\"a\":")), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error(make_file("[]")), Catch::Contains("not a JSON object"));
  CHECK_THAT(parse_error(make_file("{} x")), Catch::Contains("not valid JSON"));
  // nlohmann would stop reading at the NUL and accept this.
  CHECK_THAT(parse_error(make_file(std::string("{}\0", 3))), Catch::Contains("NUL byte"));
  CHECK_THAT(parse_error(make_file(std::string("{\"a\0\":1}", 8))), Catch::Contains("NUL byte"));
  CHECK_THAT(parse_error(make_file("{\"\xff\":1}")), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error(make_file("{\"\xc3\":1}")), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error(make_file("{\"a\":[[[[]]]]}")), Catch::Contains("nests deeper"));
  CHECK_THAT(parse_error(make_file(std::string(100000, '[') + std::string(100000, ']'))),
             Catch::Contains("nests deeper"));
}

TEST_CASE("parse_safetensors refuses bad __metadata__") {
  CHECK_THAT(parse_error(make_file(R"({"__metadata__":[]})")),
             Catch::Contains("__metadata__ is not an object"));
  CHECK_THAT(parse_error(make_file(R"({"__metadata__":"x"})")),
             Catch::Contains("__metadata__ is not an object"));
  CHECK_THAT(parse_error(make_file(R"({"__metadata__":{"k":1}})")),
             Catch::Contains("'k' is not a string"));
  CHECK_THAT(parse_error(make_file(R"({"__metadata__":{"k":null}})")),
             Catch::Contains("'k' is not a string"));
  CHECK_THAT(parse_error(make_file(R"({"__metadata__":{"k":"a","k":"b"}})")),
             Catch::Contains("'k' appears twice"));
  CHECK_THAT(parse_error(make_file(R"({"__metadata__":{},"__metadata__":{}})")),
             Catch::Contains("twice"));
}

TEST_CASE("parse_safetensors refuses malformed tensor entries, naming the tensor") {
  auto entry = [](const std::string& body, size_t data = 4) {
    return parse_error(make_file("{\"t\":" + body + "}", data));
  };
  CHECK_THAT(entry("1"), Catch::Contains("tensor 't': entry is not an object"));
  CHECK_THAT(entry(R"({"shape":[1],"data_offsets":[0,4]})"),
             Catch::Contains("tensor 't': missing key 'dtype'"));
  CHECK_THAT(entry(R"({"dtype":"F32","data_offsets":[0,4]})"),
             Catch::Contains("missing key 'shape'"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1]})"),
             Catch::Contains("missing key 'data_offsets'"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":0})"),
             Catch::Contains("tensor 't': unexpected key 'extra'"));
  CHECK_THAT(entry(R"({"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]})"),
             Catch::Contains("'dtype' appears twice"));
  CHECK_THAT(entry(R"({"dtype":"F128","shape":[1],"data_offsets":[0,4]})"),
             Catch::Contains("unknown dtype \"F128\""));
  CHECK_THAT(entry(R"({"dtype":"f32","shape":[1],"data_offsets":[0,4]})"),
             Catch::Contains("unknown dtype"));
  CHECK_THAT(entry(R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})"),
             Catch::Contains("dtype is not a string"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":1,"data_offsets":[0,4]})"),
             Catch::Contains("shape is not an array"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
             Catch::Contains("non-negative integers, got -1"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[-0],"data_offsets":[0,0]})", 0),
             Catch::Contains("non-negative"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})"),
             Catch::Contains("non-negative integers, got 1.0"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1e0],"data_offsets":[0,4]})"),
             Catch::Contains("non-negative"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":["1"],"data_offsets":[0,4]})"),
             Catch::Contains("non-negative"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]})"),
             Catch::Contains("non-negative"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[0,9223372036854775808],"data_offsets":[0,0]})", 0),
             Catch::Contains("too large"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
             Catch::Contains("tensor 't': byte size of the shape overflows"));
  CHECK_THAT(entry(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,4]})"),
             Catch::Contains("overflows"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"),
             Catch::Contains("array of two integers"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,4]})"),
             Catch::Contains("array of two integers"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":{"a":0}})"),
             Catch::Contains("array of two integers"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"),
             Catch::Contains("non-negative"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})"),
             Catch::Contains("begin 4 is after end 0"));
  CHECK_THAT(
      entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,8]})"),
      Catch::Contains("tensor 't': data_offsets end 8 is beyond the data buffer of 4 bytes"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]})"),
             Catch::Contains("beyond the data buffer"));
  CHECK_THAT(
      entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
      Catch::Contains("tensor 't': data_offsets cover 4 bytes but dtype F32 and shape need 8"));
  CHECK_THAT(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"),
             Catch::Contains("(no error)"));
}

TEST_CASE("parse_safetensors refuses tensors that do not tile the data buffer exactly") {
  auto two = [](const std::string& a, const std::string& b, size_t data) {
    return parse_error(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":)" + a +
                                     R"(},"b":{"dtype":"U8","shape":[4],"data_offsets":)" + b +
                                     "}}",
                                 data));
  };
  CHECK_THAT(two("[0,4]", "[4,8]", 8), Catch::Contains("(no error)"));
  CHECK_THAT(two("[4,8]", "[0,4]", 8), Catch::Contains("(no error)"));
  CHECK_THAT(two("[0,4]", "[2,6]", 8), Catch::Contains("tensor 'b': overlaps tensor 'a'"));
  CHECK_THAT(two("[0,4]", "[0,4]", 4), Catch::Contains("overlaps"));
  CHECK_THAT(two("[0,4]", "[5,9]", 9),
             Catch::Contains("tensor 'b': leaves a hole of 1 unused bytes"));
  CHECK_THAT(two("[1,5]", "[5,9]", 9), Catch::Contains("tensor 'a': leaves a hole"));
  CHECK_THAT(two("[0,4]", "[4,8]", 9), Catch::Contains("1 unused bytes at the end"));
  CHECK_THAT(parse_error(make_file("{}", 3)), Catch::Contains("3 unused bytes at the end"));
  // A zero-size tensor inside another one overlaps it.
  CHECK_THAT(parse_error(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                   R"("z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                                   4)),
             Catch::Contains("tensor 'z': overlaps tensor 'a'"));
  CHECK_THAT(parse_error(make_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                   R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                   2)),
             Catch::Contains("tensor 'a': name appears twice"));
}

TEST_CASE("parse_safetensors replays the fuzz corpus without crashing") {
  const std::filesystem::path dir = std::filesystem::path(TARMAC_FUZZ_CORPUS) / "fuzz_safetensors";
  REQUIRE(std::filesystem::is_directory(dir));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                     std::istreambuf_iterator<char>()};
    try {
      parse_safetensors(bytes);
    } catch (const ParseError&) {
    }
    ++files;
  }
  CHECK(files > 0);
}
