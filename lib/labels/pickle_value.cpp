// The value model of the restricted unpickler: the nodes of the object graph while unpickling
// (Arena), and the copy of the finished graph handed out as a PickleValue, bounded so that
// shared or cyclic references cannot blow it up. Also PickleValue's own accessors.
#include <cstring>

#include "common/error.h"
#include "common/utf8.h"
#include "labels/pickle_internal.h"

namespace tarmac {
namespace pickle_detail {

namespace {

constexpr int kMaxDepth = 64;

class ValueCopier {
 public:
  ValueCopier(const Arena& arena, size_t input_size) : arena_(arena), input_size_(input_size) {}

  PickleValue convert(uint32_t i, int depth) {
    if (depth > kMaxDepth)
      fail("the pickle nests deeper than " + std::to_string(kMaxDepth) +
           " levels (or holds a container inside itself)");
    if (++out_nodes_ > 2 * static_cast<uint64_t>(input_size_) + 256)
      fail(
          "the pickle refers to the same containers so often that its value would be far "
          "larger than the file");
    const Node& n = node(i);
    PickleValue v;
    auto charge = [&](size_t bytes) {
      out_bytes_ += bytes;
      if (out_bytes_ > 64 * static_cast<uint64_t>(input_size_) + (1u << 20))
        fail(
            "the pickle refers to the same data so often that its value would be far larger "
            "than the file");
    };
    switch (n.kind) {
      case Node::Kind::None:
        v.type = PickleValue::Type::None;
        break;
      case Node::Kind::Bool:
        v.type = PickleValue::Type::Bool;
        v.boolean = n.boolean;
        break;
      case Node::Kind::Int:
        v.type = PickleValue::Type::Int;
        v.integer = n.integer;
        break;
      case Node::Kind::Float:
        v.type = PickleValue::Type::Float;
        v.real = n.real;
        break;
      case Node::Kind::Str:
      case Node::Kind::Bytes:
        v.type = n.kind == Node::Kind::Str ? PickleValue::Type::Str : PickleValue::Type::Bytes;
        charge(n.text.size());
        v.text = n.text;
        break;
      case Node::Kind::List:
      case Node::Kind::Tuple: {
        v.type = n.kind == Node::Kind::List ? PickleValue::Type::List : PickleValue::Type::Tuple;
        const std::vector<uint32_t> items = n.items;  // nodes_ does not grow here, but be plain
        for (uint32_t c : items) v.items.push_back(convert(c, depth + 1));
        break;
      }
      case Node::Kind::Dict: {
        v.type = PickleValue::Type::Dict;
        for (size_t k = 0; k < n.keys.size(); ++k) {
          v.keys.push_back(convert(n.keys[k], depth + 1));
          v.items.push_back(convert(n.items[k], depth + 1));
        }
        break;
      }
      case Node::Kind::Array: {
        if (!n.built) fail("the pickle holds a numpy array whose state was never set (no BUILD)");
        const Node& d = node(n.dtype);
        v.type = PickleValue::Type::Array;
        v.shape = n.shape;
        if (d.dkind == 'O') {
          v.text = "|O";
          for (uint32_t c : n.items) v.items.push_back(convert(c, depth + 1));
          break;
        }
        const bool one_byte = d.dkind == 'S' || d.dkind == 'b' || d.itemsize == 1;
        const size_t digits = d.dkind == 'U' ? d.itemsize / 4 : d.itemsize;
        v.text = std::string(1, one_byte ? '|' : '<') + d.dkind + std::to_string(digits);
        charge(n.data.size());
        v.data = n.data;
        break;
      }
      case Node::Kind::Global:
        fail("the pickle holds the global '" + n.text + "' as a value, refused");
      case Node::Kind::DType:
        fail("the pickle holds a bare numpy dtype as a value, refused");
    }
    return v;
  }

 private:
  const Node& node(uint32_t i) const { return arena_.node(i); }

  const Arena& arena_;
  size_t input_size_;
  uint64_t out_nodes_ = 0;
  uint64_t out_bytes_ = 0;
};

}  // namespace

const char* kind_name(Node::Kind k) {
  switch (k) {
    case Node::Kind::None:
      return "None";
    case Node::Kind::Bool:
      return "bool";
    case Node::Kind::Int:
      return "int";
    case Node::Kind::Float:
      return "float";
    case Node::Kind::Str:
      return "str";
    case Node::Kind::Bytes:
      return "bytes";
    case Node::Kind::List:
      return "list";
    case Node::Kind::Tuple:
      return "tuple";
    case Node::Kind::Dict:
      return "dict";
    case Node::Kind::Array:
      return "ndarray";
    case Node::Kind::Global:
      return "global";
    case Node::Kind::DType:
      return "dtype";
  }
  return "?";
}

void fail(const std::string& what) {
  throw ParseError(what);
}

uint32_t Arena::make(Node::Kind kind) {
  nodes_.emplace_back();
  nodes_.back().kind = kind;
  return static_cast<uint32_t>(nodes_.size() - 1);
}

Node& Arena::expect(uint32_t i, Node::Kind kind, const char* what) {
  if (node(i).kind != kind)
    fail(std::string("the pickle gives ") + what + " a " + kind_name(node(i).kind) + " where a " +
         kind_name(kind) + " belongs");
  return node(i);
}

PickleValue to_value(const Arena& arena, uint32_t root, size_t input_size) {
  return ValueCopier(arena, input_size).convert(root, 0);
}

}  // namespace pickle_detail

uint64_t PickleValue::num_elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const PickleValue* PickleValue::find(const std::string& key) const {
  for (size_t k = 0; k < keys.size(); ++k)
    if (keys[k].type == Type::Str && keys[k].text == key) return &items[k];
  return nullptr;
}

const char* pickle_type_name(PickleValue::Type t) {
  switch (t) {
    case PickleValue::Type::None:
      return "None";
    case PickleValue::Type::Bool:
      return "bool";
    case PickleValue::Type::Int:
      return "int";
    case PickleValue::Type::Float:
      return "float";
    case PickleValue::Type::Str:
      return "str";
    case PickleValue::Type::Bytes:
      return "bytes";
    case PickleValue::Type::List:
      return "list";
    case PickleValue::Type::Tuple:
      return "tuple";
    case PickleValue::Type::Dict:
      return "dict";
    case PickleValue::Type::Array:
      return "ndarray";
  }
  return "?";
}

std::string pickle_array_string(const PickleValue& array, uint64_t i) {
  const std::string& d = array.text;
  if (array.type != PickleValue::Type::Array || d.size() < 3 || (d[1] != 'U' && d[1] != 'S'))
    throw ParseError("not a string array");
  const uint64_t count = array.num_elements();
  if (i >= count) throw ParseError("string index out of range");
  const size_t size = count ? array.data.size() / count : 0;
  const uint8_t* p = array.data.data() + i * size;
  std::string out;
  if (d[1] == 'S') {
    size_t len = size;
    while (len > 0 && p[len - 1] == 0) --len;
    out.assign(reinterpret_cast<const char*>(p), len);
    if (!is_valid_utf8(out)) throw ParseError("a bytes array holds text that is not UTF-8");
    return out;
  }
  size_t units = size / 4;
  auto unit = [&](size_t k) {
    uint32_t cp;
    std::memcpy(&cp, p + 4 * k, 4);
    return cp;
  };
  while (units > 0 && unit(units - 1) == 0) --units;
  for (size_t k = 0; k < units; ++k) {
    const uint32_t cp = unit(k);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      throw ParseError("a unicode array holds the invalid code point " + std::to_string(cp));
    append_utf8(out, cp);
  }
  return out;
}

}  // namespace tarmac
