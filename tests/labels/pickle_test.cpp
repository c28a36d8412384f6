// The restricted unpickler on pickles written by Python's pickle module (the byte strings
// below, each made by the expression above it) and on hand-made hostile opcode sequences.
#include "labels/pickle.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"

using Catch::Matchers::Contains;
using tarmac::ParseError;
using tarmac::PickleValue;
using tarmac::unpickle;

using namespace std::string_literals;

namespace {

// pickle.dumps(np.array([[1, 2, 3], [4, 5, 6]], dtype='>i2'), protocol=2)
const char kBigEndianI2[] =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79"
    "\x0a\x5f\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a"
    "\x6e"
    "\x64\x61\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a"
    "\x65"
    "\x6e\x63\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00\x00\x6c\x61"
    "\x74"
    "\x69\x6e\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b\x01\x4b\x02\x4b"
    "\x03"
    "\x86\x71\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02\x00\x00\x00"
    "\x69"
    "\x32\x71\x0c\x89\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00\x3e\x71\x0f\x4e"
    "\x4e"
    "\x4e\x4a\xff\xff\xff\xff\x4a\xff\xff\xff\xff\x4b\x00\x74\x71\x10\x62\x89\x68\x03\x58\x0c\x00"
    "\x00"
    "\x00\x00\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x71\x11\x68\x05\x86\x71\x12\x52\x71\x13"
    "\x74"
    "\x71\x14\x62\x2e";
// pickle.dumps(np.asfortranarray(np.array([[1.5, 2.5], [3.5, 4.5]], dtype='<f4')), protocol=2)
const char kFortranF4[] =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79"
    "\x0a\x5f\x72\x65\x63\x6f\x6e\x73\x74\x72\x75\x63\x74\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a"
    "\x6e"
    "\x64\x61\x72\x72\x61\x79\x0a\x71\x01\x4b\x00\x85\x71\x02\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a"
    "\x65"
    "\x6e\x63\x6f\x64\x65\x0a\x71\x03\x58\x01\x00\x00\x00\x62\x71\x04\x58\x06\x00\x00\x00\x6c\x61"
    "\x74"
    "\x69\x6e\x31\x71\x05\x86\x71\x06\x52\x71\x07\x87\x71\x08\x52\x71\x09\x28\x4b\x01\x4b\x02\x4b"
    "\x02"
    "\x86\x71\x0a\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a\x71\x0b\x58\x02\x00\x00\x00"
    "\x66"
    "\x34\x71\x0c\x89\x88\x87\x71\x0d\x52\x71\x0e\x28\x4b\x03\x58\x01\x00\x00\x00\x3c\x71\x0f\x4e"
    "\x4e"
    "\x4e\x4a\xff\xff\xff\xff\x4a\xff\xff\xff\xff\x4b\x00\x74\x71\x10\x62\x88\x68\x03\x58\x12\x00"
    "\x00"
    "\x00\x00\x00\xc3\x80\x3f\x00\x00\x60\x40\x00\x00\x20\x40\x00\x00\xc2\x90\x40\x71\x11\x68\x05"
    "\x86"
    "\x71\x12\x52\x71\x13\x74\x71\x14\x62\x2e";
// pickle.dumps(np.float64(0.25), protocol=2)
const char kScalarF8[] =
    "\x80\x02\x63\x6e\x75\x6d\x70\x79\x2e\x63\x6f\x72\x65\x2e\x6d\x75\x6c\x74\x69\x61\x72\x72\x61"
    "\x79"
    "\x0a\x73\x63\x61\x6c\x61\x72\x0a\x71\x00\x63\x6e\x75\x6d\x70\x79\x0a\x64\x74\x79\x70\x65\x0a"
    "\x71"
    "\x01\x58\x02\x00\x00\x00\x66\x38\x71\x02\x89\x88\x87\x71\x03\x52\x71\x04\x28\x4b\x03\x58\x01"
    "\x00"
    "\x00\x00\x3c\x71\x05\x4e\x4e\x4e\x4a\xff\xff\xff\xff\x4a\xff\xff\xff\xff\x4b\x00\x74\x71\x06"
    "\x62"
    "\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a\x71\x07\x58\x09\x00\x00\x00"
    "\x00"
    "\x00\x00\x00\x00\x00\xc3\x90\x3f\x71\x08\x58\x06\x00\x00\x00\x6c\x61\x74\x69\x6e\x31\x71\x09"
    "\x86"
    "\x71\x0a\x52\x71\x0b\x86\x71\x0c\x52\x71\x0d\x2e";

template <size_t N>
PickleValue load(const char (&s)[N]) {
  return unpickle({reinterpret_cast<const uint8_t*>(s), N - 1});
}

PickleValue load(const std::string& s) {
  return unpickle({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

template <typename T>
std::vector<T> elements(const PickleValue& a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

}  // namespace

TEST_CASE("pickle: a big-endian int16 array comes out little-endian, C order") {
  const PickleValue a = load(kBigEndianI2);
  REQUIRE(a.type == PickleValue::Type::Array);
  CHECK(a.text == "<i2");
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(elements<int16_t>(a) == std::vector<int16_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("pickle: a Fortran-order float32 array is reordered to C order") {
  const PickleValue a = load(kFortranF4);
  CHECK(a.text == "<f4");
  CHECK(a.shape == std::vector<int64_t>{2, 2});
  CHECK(elements<float>(a) == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f});
}

TEST_CASE("pickle: a numpy scalar is a 0-d array") {
  const PickleValue a = load(kScalarF8);
  CHECK(a.text == "<f8");
  CHECK(a.shape.empty());
  CHECK(elements<double>(a) == std::vector<double>{0.25});
}

TEST_CASE("pickle: dicts, lists, tuples, strings and numbers (protocol 2 opcodes)") {
  // {'a': [1, -2, 'x'], 'b': (None, True)} as pickle.dumps(..., protocol=2) writes it
  const std::string p = "\x80\x02}q\x00(X\x01\x00\x00\x00\x61q\x01]q\x02(K\x01J\xfe\xff\xff\xff"s +
                        "X\x01\x00\x00\x00xq\x03\x65X\x01\x00\x00\x00\x62q\x04N\x88\x86q\x05u."s;
  const PickleValue v = load(p);
  REQUIRE(v.type == PickleValue::Type::Dict);
  REQUIRE(v.keys.size() == 2);
  const PickleValue* a = v.find("a");
  REQUIRE(a);
  REQUIRE(a->items.size() == 3);
  CHECK(a->items[0].integer == 1);
  CHECK(a->items[1].integer == -2);
  CHECK(a->items[2].text == "x");
  const PickleValue* b = v.find("b");
  REQUIRE(b);
  CHECK(b->type == PickleValue::Type::Tuple);
  CHECK(b->items[0].type == PickleValue::Type::None);
  CHECK(b->items[1].boolean);
}

TEST_CASE("pickle: globals outside the allow-list are refused by name") {
  // pickle.dumps of a class whose __reduce__ returns (os.system, ('echo',)), protocol 2
  CHECK_THROWS_WITH(load("\x80\x02\x63posix\nsystem\nX\x04\x00\x00\x00\x65\x63ho\x85R."s),
                    Contains("'posix.system'") && Contains("refused"));
  // protocol 4: STACK_GLOBAL of builtins.eval
  CHECK_THROWS_WITH(load("\x80\x04\x8c\x08\x62uiltins\x8c\x04\x65val\x93."s),
                    Contains("'builtins.eval'"));
  CHECK_THROWS_WITH(load("\x80\x02\x63numpy\nload\n."s), Contains("'numpy.load'"));
}

TEST_CASE("pickle: opcodes that can run code are refused by name") {
  CHECK_THROWS_WITH(load("\x80\x02(\x69os\nsystem\n."s), Contains("INST"));
  CHECK_THROWS_WITH(load("\x80\x02)\x81."s), Contains("NEWOBJ"));
  CHECK_THROWS_WITH(load("\x80\x02\x82\x01."s), Contains("EXT1"));
  CHECK_THROWS_WITH(load("\x80\x02X\x01\x00\x00\x00\x61Q."s), Contains("BINPERSID"));
}

TEST_CASE("pickle: malformed input is a ParseError, not a crash") {
  CHECK_THROWS_AS(load(std::string()), ParseError);
  CHECK_THROWS_WITH(load("\x80\x02K"s), Contains("truncated"));
  CHECK_THROWS_WITH(load("\x80\x02K\x01"s), Contains("STOP"));
  CHECK_THROWS_WITH(load("\x80\x02\x85."s), Contains("empty stack"));
  CHECK_THROWS_WITH(load("\x80\x02h\x05."s), Contains("memo"));
  CHECK_THROWS_WITH(load("\x80\x02X\xff\xff\xff\xff."s), Contains("truncated"));
  // a list that holds itself: l = []; l.append(l)
  CHECK_THROWS_WITH(load("\x80\x02]q\x00h\x00\x61."s), Contains("deeper"));
  // an ndarray without its BUILD
  CHECK_THROWS_WITH(load("\x80\x02\x63numpy.core.multiarray\n_reconstruct\n"
                         "\x63numpy\nndarray\nK\x00\x85\x43\x01\x62\x87R."s),
                    Contains("BUILD"));
}

TEST_CASE("pickle: every prefix of a valid pickle is refused cleanly") {
  const std::string p(kBigEndianI2, sizeof kBigEndianI2 - 1);
  for (size_t n = 0; n < p.size(); ++n) CHECK_THROWS_AS(load(p.substr(0, n)), ParseError);
}

TEST_CASE("pickle: LONG1 integers are sign-extended, wider ones refused; BINFLOAT is big-endian") {
  // pickle.dumps(-2**40, protocol=2)
  CHECK(load("\x80\x02\x8a\x06\x00\x00\x00\x00\x00\xff."s).integer == -(int64_t{1} << 40));
  // pickle.dumps(2**63, protocol=2): nine bytes
  CHECK_THROWS_WITH(load("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."s),
                    Contains("an integer of 9 bytes, wider than 64 bits"));
  // pickle.dumps(0.1, protocol=2)
  const PickleValue f = load("\x80\x02G\x3f\xb9\x99\x99\x99\x99\x99\x9a."s);
  CHECK(f.type == PickleValue::Type::Float);
  CHECK(f.real == 0.1);
}
