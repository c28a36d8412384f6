// The numpy reconstructors of the restricted unpickler (lib/labels/pickle_numpy.cpp): arrays by
// _frombuffer and of objects, and the refusals of dtypes, encodings and data it cannot rebuild.
// Each byte string was written by Debian's python3 pickle module (numpy 1.24) from the
// expression above it, or by hand where it says so.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/pickle.h"

using Catch::Matchers::Contains;
using tarmac::PickleValue;

using namespace std::string_literals;

namespace {

PickleValue unpickle_numpy(const std::string& s) {
  return tarmac::unpickle({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

// pickle.dumps(np.asfortranarray(np.array([[1, 2], [3, 4]], dtype='<u2')), protocol=5)
const std::string kFortranU2P5 =
    "\x80\x05\x95\x7d\x00\x00\x00\x00\x00\x00\x00\x8c\x12\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65"
    "\x2e\x6e\x75\x6d\x65\x72\x69\x63\x94\x8c\x0b\x5f\x66\x72\x6f\x6d\x62\x75\x66\x66\x65\x72\x94"
    "\x93\x94\x28\x96\x08\x00\x00\x00\x00\x00\x00\x00\x01\x00\x03\x00\x02\x00\x04\x00\x94\x8c\x05"
    "\x6e\x75\x6d\x70\x79\x94\x8c\x05\x64\x74\x79\x70\x65\x94\x93\x94\x8c\x02\x75\x32\x94\x89\x88"
    "\x87\x94\x52\x94\x28\x4b\x03\x8c\x01\x3c\x94\x4e\x4e\x4e\x4a\xff\xff\xff\xff\x4a\xff\xff\xff"
    "\xff\x4b\x00\x74\x94\x62\x4b\x02\x4b\x02\x86\x94\x8c\x01\x46\x94\x74\x94\x52\x94\x2e"s;

// pickle.dumps(np.array([1, 'a', None], dtype=object), protocol=2)
const std::string kObjectArray =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79\x0a\x5f\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79"
    "\x0a\x6e\x64\x61\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63"
    "\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00"
    "\x00\x6c\x61\x74\x69\x6e\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b"
    "\x01\x4b\x03\x85\x71\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02"
    "\x00\x00\x00\x4f\x38\x71\x0c\x89\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00"
    "\x7c\x71\x0f\x4e\x4e\x4e\x4a\xff\xff\xff\xff\x4a\xff\xff\xff\xff\x4b\x3f\x74\x71\x10\x62\x89"
    "\x5d\x71\x11\x28\x4b\x01\x58\x01\x00\x00\x00\x61\x71\x12\x4e\x65\x74\x71\x13\x62\x2e"s;

// pickle.dumps(np.array([(1, 2.0)], dtype=[('a', '<i4'), ('b', '<f8')]), protocol=2), cut
// after the dtype's REDUCE: numpy.dtype('V12', False, True) is where it is refused.
const std::string kStructuredPrefix =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79\x0a\x5f\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79"
    "\x0a\x6e\x64\x61\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63"
    "\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00"
    "\x00\x6c\x61\x74\x69\x6e\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b"
    "\x01\x4b\x01\x85\x71\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x03"
    "\x00\x00\x00\x56\x31\x32\x71\x0c\x89\x88\x87\x71\x0d\x52"s;

}  // namespace

TEST_CASE("pickle numpy: a protocol 5 _frombuffer array in Fortran order comes out in C order") {
  const PickleValue a = unpickle_numpy(kFortranU2P5);
  REQUIRE(a.type == PickleValue::Type::Array);
  CHECK(a.text == "<u2");
  CHECK(a.shape == std::vector<int64_t>{2, 2});
  // stored 1 3 2 4 (columns first); C order is 1 2 3 4
  CHECK(a.data == std::vector<uint8_t>{1, 0, 2, 0, 3, 0, 4, 0});
}

TEST_CASE("pickle numpy: an object array holds its elements as values") {
  const PickleValue a = unpickle_numpy(kObjectArray);
  REQUIRE(a.type == PickleValue::Type::Array);
  CHECK(a.text == "|O");
  CHECK(a.shape == std::vector<int64_t>{3});
  CHECK(a.data.empty());
  REQUIRE(a.items.size() == 3);
  CHECK(a.items[0].type == PickleValue::Type::Int);
  CHECK(a.items[0].integer == 1);
  CHECK(a.items[1].type == PickleValue::Type::Str);
  CHECK(a.items[1].text == "a");
  CHECK(a.items[2].type == PickleValue::Type::None);
}

TEST_CASE("pickle numpy: a structured dtype is refused by name") {
  CHECK_THROWS_WITH(unpickle_numpy(kStructuredPrefix + "."s),
                    Contains("the pickle holds the structured dtype 'V12', refused"));
}

TEST_CASE("pickle numpy: array data shorter than its shape needs is refused") {
  // kFortranU2P5 by hand with its buffer cut from 8 bytes to 6 (and its FRAME to match)
  std::string p = kFortranU2P5;
  p.replace(p.find("\x95\x7d"s), 2, "\x95\x7b"s);
  p.replace(p.find("\x96\x08"s), 2, "\x96\x06"s);
  p.erase(p.find("\x01\x00\x03\x00\x02\x00\x04\x00"s) + 6, 2);
  CHECK_THROWS_WITH(unpickle_numpy(p),
                    Contains("an array whose data is 6 bytes where its shape and dtype need 8"));
}

TEST_CASE("pickle numpy: _codecs.encode reads latin1 only") {
  // by hand: _codecs.encode('a', 'utf-8')
  CHECK_THROWS_WITH(
      unpickle_numpy(
          "\x80\x02\x63_codecs\nencode\nX\x01\x00\x00\x00\x61X\x05\x00\x00\x00utf-8\x86R."s),
      Contains("the encoding 'utf-8'; only latin1 is read"));
  // by hand: _codecs.encode('\u0100', 'latin1'), a code point above 255
  CHECK_THROWS_WITH(
      unpickle_numpy(
          "\x80\x02\x63_codecs\nencode\nX\x02\x00\x00\x00\xc4\x80X\x06\x00\x00\x00latin1\x86R."s),
      Contains("on text outside latin1"));
  // by hand: _codecs.encode('\u00e9z', 'latin1') is the two bytes e9 7a
  const PickleValue b = unpickle_numpy(
      "\x80\x02\x63_codecs\nencode\nX\x03\x00\x00\x00\xc3\xa9zX\x06\x00\x00\x00latin1\x86R."s);
  CHECK(b.type == PickleValue::Type::Bytes);
  CHECK(b.text == "\xe9z"s);
}
