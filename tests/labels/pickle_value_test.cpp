// The value model of the restricted unpickler (lib/labels/pickle_value.cpp): the copy handed
// out (dict keys, the bounds on shared references) and the strings of "<U"/"|S" arrays. Byte
// strings were written by Debian's python3 pickle module (numpy 1.24) from the expression above
// them, or by hand where it says so.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/pickle.h"

using Catch::Matchers::Contains;
using tarmac::pickle_array_string;
using tarmac::PickleValue;

using namespace std::string_literals;

namespace {

PickleValue unpickle_value(const std::string& s) {
  return tarmac::unpickle({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

std::string le32(uint32_t v) {
  return {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
          static_cast<char>(v >> 24)};
}

// pickle.dumps(np.array(['ab', '\u00e9'], dtype='<U2'), protocol=2)
const std::string kUnicodeU2 =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79\x0a\x5f\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79"
    "\x0a\x6e\x64\x61\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63"
    "\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00"
    "\x00\x6c\x61\x74\x69\x6e\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b"
    "\x01\x4b\x02\x85\x71\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02"
    "\x00\x00\x00\x55\x32\x71\x0c\x89\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00"
    "\x3c\x71\x0f\x4e\x4e\x4e\x4b\x08\x4b\x04\x4b\x08\x74\x71\x10\x62\x89\x68\x03\x58\x11\x00\x00"
    "\x00\x61\x00\x00\x00\x62\x00\x00\x00\xc3\xa9\x00\x00\x00\x00\x00\x00\x00\x71\x11\x68\x05\x86"
    "\x71\x12\x52\x71\x13\x74\x71\x14\x62\x2e"s;

// pickle.dumps(np.array([b'x', b'yz']), protocol=2)
const std::string kBytesS2 =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79\x0a\x5f\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79"
    "\x0a\x6e\x64\x61\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63"
    "\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00"
    "\x00\x6c\x61\x74\x69\x6e\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b"
    "\x01\x4b\x02\x85\x71\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02"
    "\x00\x00\x00\x53\x32\x71\x0c\x89\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00"
    "\x7c\x71\x0f\x4e\x4e\x4e\x4b\x02\x4b\x01\x4b\x00\x74\x71\x10\x62\x89\x68\x03\x58\x04\x00\x00"
    "\x00\x78\x00\x79\x7a\x71\x11\x68\x05\x86\x71\x12\x52\x71\x13\x74\x71\x14\x62\x2e"s;

// a = []
// for _ in range(20): a = [a, a]
// pickle.dumps(a, protocol=2): 146 bytes whose value has 2**21 - 1 lists
const std::string kSharedLists =
    "\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x28\x5d\x71\x02\x28\x5d\x71\x03\x28\x5d\x71\x04\x28\x5d"
    "\x71\x05\x28\x5d\x71\x06\x28\x5d\x71\x07\x28\x5d\x71\x08\x28\x5d\x71\x09\x28\x5d\x71\x0a\x28"
    "\x5d\x71\x0b\x28\x5d\x71\x0c\x28\x5d\x71\x0d\x28\x5d\x71\x0e\x28\x5d\x71\x0f\x28\x5d\x71\x10"
    "\x28\x5d\x71\x11\x28\x5d\x71\x12\x28\x5d\x71\x13\x28\x5d\x71\x14\x68\x14\x65\x68\x13\x65\x68"
    "\x12\x65\x68\x11\x65\x68\x10\x65\x68\x0f\x65\x68\x0e\x65\x68\x0d\x65\x68\x0c\x65\x68\x0b\x65"
    "\x68\x0a\x65\x68\x09\x65\x68\x08\x65\x68\x07\x65\x68\x06\x65\x68\x05\x65\x68\x04\x65\x68\x03"
    "\x65\x68\x02\x65\x68\x01\x65\x2e"s;

// By hand, protocol 3: a list holding `refs` references to one bytes object of 1,000 bytes.
std::string shared_bytes(int refs) {
  std::string p = "\x80\x03]q\x00(B"s + le32(1000) + std::string(1000, 'x') + "q\x01"s;
  for (int k = 1; k < refs; ++k) p += "h\x01"s;
  return p + "e."s;
}

}  // namespace

TEST_CASE("pickle value: a repeated dict key keeps its first place and takes the last value") {
  // by hand: {'a': 1, 'b': 2, 'a': 3} as one MARK ... SETITEMS, as Python's dict would hold it
  const PickleValue v = unpickle_value(
      "\x80\x02}(X\x01\x00\x00\x00\x61K\x01X\x01\x00\x00\x00\x62K\x02X\x01\x00\x00\x00\x61K\x03u."s);
  REQUIRE(v.type == PickleValue::Type::Dict);
  REQUIRE(v.keys.size() == 2);
  CHECK(v.keys[0].text == "a");
  CHECK(v.keys[1].text == "b");
  CHECK(v.items[0].integer == 3);
  CHECK(v.items[1].integer == 2);
  REQUIRE(v.find("a"));
  CHECK(v.find("a")->integer == 3);
  CHECK(v.find("c") == nullptr);
}

TEST_CASE("pickle value: strings of unicode and bytes arrays, trailing NULs stripped") {
  const PickleValue u = unpickle_value(kUnicodeU2);
  REQUIRE(u.type == PickleValue::Type::Array);
  CHECK(u.text == "<U2");
  CHECK(u.num_elements() == 2);
  CHECK(pickle_array_string(u, 0) == "ab");
  CHECK(pickle_array_string(u, 1) == "\xc3\xa9");  // U+00E9 as UTF-8
  CHECK_THROWS_WITH(pickle_array_string(u, 2), Contains("out of range"));

  const PickleValue s = unpickle_value(kBytesS2);
  CHECK(s.text == "|S2");
  CHECK(pickle_array_string(s, 0) == "x");
  CHECK(pickle_array_string(s, 1) == "yz");
}

TEST_CASE("pickle value: invalid code points and non-UTF-8 bytes in string arrays are refused") {
  PickleValue u;
  u.type = PickleValue::Type::Array;
  u.text = "<U1";
  u.shape = {1};
  u.data = {0x00, 0xD8, 0x00, 0x00};  // U+D800, a lone surrogate
  CHECK_THROWS_WITH(pickle_array_string(u, 0), Contains("invalid code point 55296"));
  PickleValue s;
  s.type = PickleValue::Type::Array;
  s.text = "|S1";
  s.shape = {1};
  s.data = {0xFF};
  CHECK_THROWS_WITH(pickle_array_string(s, 0), Contains("not UTF-8"));
  PickleValue f;
  f.type = PickleValue::Type::Array;
  f.text = "<f8";
  CHECK_THROWS_WITH(pickle_array_string(f, 0), Contains("not a string array"));
}

TEST_CASE("pickle value: shared references cannot make the value far larger than the file") {
  // 2**21 - 1 lists from 146 bytes: more than 2 * 146 + 256 nodes
  CHECK_THROWS_WITH(unpickle_value(kSharedLists), Contains("the same containers so often"));
  // 1,000 references to 1,000 bytes (1,000,000 bytes) from 3,013: under 64 * 3,013 + 1 MiB
  const PickleValue ok = unpickle_value(shared_bytes(1000));
  REQUIRE(ok.items.size() == 1000);
  CHECK(ok.items[999].text == std::string(1000, 'x'));
  // 2,000 references (2,000,000 bytes) from 5,013: over 64 * 5,013 + 1 MiB = 1,369,408
  CHECK_THROWS_WITH(unpickle_value(shared_bytes(2000)), Contains("the same data so often"));
}
