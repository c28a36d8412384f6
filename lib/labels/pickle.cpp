#include "labels/pickle.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string_view>
#include <unordered_map>

#include "common/error.h"
#include "common/utf8.h"

namespace tarmac {

static_assert(std::endian::native == std::endian::little,
              "array data is stored by memcpy on a little-endian host");

namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxDims = 64;

// The only callables a pickle may name. Each is interpreted here, never called.
enum class Global { Reconstruct, NdarrayType, DTypeType, Scalar, CodecsEncode, FromBuffer, Bytes };

// numpy 1.x names its modules numpy.core.*, numpy 2.x numpy._core.*.
bool lookup_global(const std::string& module, const std::string& name, Global& out) {
  const bool core = module == "numpy.core.multiarray" || module == "numpy._core.multiarray";
  const bool numeric = module == "numpy.core.numeric" || module == "numpy._core.numeric";
  if (core && name == "_reconstruct")
    out = Global::Reconstruct;
  else if (core && name == "scalar")
    out = Global::Scalar;
  else if (numeric && name == "_frombuffer")
    out = Global::FromBuffer;
  else if (module == "numpy" && name == "ndarray")
    out = Global::NdarrayType;
  else if (module == "numpy" && name == "dtype")
    out = Global::DTypeType;
  else if ((module == "builtins" || module == "__builtin__") && name == "bytes")
    out = Global::Bytes;  // protocol 2 writes b'' as bytes(); nothing else is accepted
  else if (module == "_codecs" && name == "encode")
    out = Global::CodecsEncode;
  else
    return false;
  return true;
}

// An object while unpickling. Objects live in one arena and refer to each other by index, so
// that the memo can share them and a hostile cycle (a list holding itself) cannot leak.
struct Node {
  enum class Kind { None, Bool, Int, Float, Str, Bytes, List, Tuple, Dict, Array, Global, DType };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;  // Str, Bytes; Global: "module.name"
  std::vector<uint32_t> items, keys;
  std::unordered_map<std::string, size_t> str_keys;  // Dict: where each str key sits
  // Global
  ::tarmac::Global global = ::tarmac::Global::Reconstruct;
  // DType: kind 'b' 'i' 'u' 'f' 'U' 'S' 'O', bytes per element, byte order '<' '>' '|' '='
  char dkind = 0;
  size_t itemsize = 0;
  char order = '=';
  // Array: built once its state has been set (BUILD, or scalar/_frombuffer)
  bool built = false;
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

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

struct OpName {
  uint8_t code;
  const char* name;
};
// Opcodes that are refused get named in the error; these are the ones worth a name.
constexpr OpName kRefusedOps[] = {
    {'i', "INST"},
    {'o', "OBJ"},
    {'P', "PERSID"},
    {'Q', "BINPERSID"},
    {0x81, "NEWOBJ"},
    {0x92, "NEWOBJ_EX"},
    {0x82, "EXT1"},
    {0x83, "EXT2"},
    {0x84, "EXT4"},
    {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
    {'I', "INT"},
    {'L', "LONG"},
    {'F', "FLOAT"},
    {'S', "STRING"},
    {'V', "UNICODE"},
    {'p', "PUT"},
    {'g', "GET"},
    {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},
};

std::string opcode_text(uint8_t op) {
  for (const OpName& o : kRefusedOps)
    if (o.code == op) return o.name;
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02x", op);
  return buf;
}

class Unpickler {
 public:
  explicit Unpickler(std::span<const uint8_t> in) : in_(in) {}

  PickleValue run() {
    for (;;) {
      if (pos_ >= in_.size()) fail("the pickle ends without its STOP opcode");
      const size_t at = pos_;
      const uint8_t op = in_[pos_++];
      if (op == '.') break;
      step(op, at);
    }
    if (!marks_.empty()) fail("the pickle ends with an open MARK");
    if (stack_.size() != 1)
      fail("the pickle ends with " + std::to_string(stack_.size()) +
           " values on its stack, not one");
    return convert(stack_.back(), 0);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw ParseError(what); }

  // --- reading the input, every read bounds-checked ---
  const uint8_t* take(uint64_t n) {
    if (n > in_.size() - pos_)
      fail("the pickle is truncated: " + std::to_string(n) + " bytes needed at byte " +
           std::to_string(pos_) + ", " + std::to_string(in_.size() - pos_) + " left");
    const uint8_t* p = in_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint64_t uint_le(size_t n) {
    const uint8_t* p = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
  }
  std::string line() {
    const size_t start = pos_;
    while (pos_ < in_.size() && in_[pos_] != '\n') ++pos_;
    if (pos_ >= in_.size()) fail("the pickle is truncated inside a GLOBAL opcode's names");
    std::string s(reinterpret_cast<const char*>(in_.data() + start), pos_ - start);
    ++pos_;
    return s;
  }

  // --- the arena and the stack ---
  uint32_t make(Node::Kind kind) {
    // Every node costs at least one opcode byte, so the arena is bounded by the input.
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  Node& node(uint32_t i) { return nodes_[i]; }
  void push(uint32_t i) { stack_.push_back(i); }
  size_t frame_start() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= frame_start()) fail("the pickle pops from an empty stack");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() {
    if (stack_.size() <= frame_start()) fail("the pickle reads from an empty stack");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("the pickle closes a MARK it never opened");
    std::vector<uint32_t> items(stack_.begin() + static_cast<ptrdiff_t>(marks_.back()),
                                stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  uint32_t make_text(Node::Kind kind, uint64_t n) {
    const uint8_t* p = take(n);
    const uint32_t i = make(kind);
    node(i).text.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    if (kind == Node::Kind::Str && !is_valid_utf8(node(i).text))
      fail("the pickle holds a str that is not valid UTF-8");
    return i;
  }
  uint32_t make_tuple(std::vector<uint32_t> items) {
    const uint32_t i = make(Node::Kind::Tuple);
    node(i).items = std::move(items);
    return i;
  }
  uint32_t make_int(int64_t v) {
    const uint32_t i = make(Node::Kind::Int);
    node(i).integer = v;
    return i;
  }

  void memo_put(uint64_t key) { memo_[key] = top(); }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end())
      fail("the pickle reads the memo slot " + std::to_string(key) + ", which was never written");
    push(it->second);
  }

  Node& expect(uint32_t i, Node::Kind kind, const char* what) {
    if (node(i).kind != kind)
      fail(std::string("the pickle gives ") + what + " a " + kind_name(node(i).kind) + " where a " +
           kind_name(kind) + " belongs");
    return node(i);
  }

  void set_item(uint32_t dict, uint32_t key, uint32_t value) {
    Node& d = expect(dict, Node::Kind::Dict, "SETITEM");
    if (node(key).kind == Node::Kind::Str) {
      auto [it, fresh] = d.str_keys.emplace(node(key).text, d.keys.size());
      if (!fresh) {
        d.items[it->second] = value;  // as in Python, a repeated key keeps its place
        return;
      }
    }
    d.keys.push_back(key);
    d.items.push_back(value);
  }

  void step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t v = uint_le(1);
        if (v < 2 || v > 5)
          fail("the pickle is protocol " + std::to_string(v) + "; protocols 2 to 5 are read");
        return;
      }
      case 0x95:  // FRAME: a length prefix for buffering; the opcodes inside are read as usual
        if (uint_le(8) > in_.size() - pos_) fail("the pickle's FRAME is longer than the input");
        return;
      case '(':
        marks_.push_back(stack_.size());
        return;
      case '0':
        if (stack_.size() > frame_start())
          stack_.pop_back();
        else
          pop_mark();
        return;
      case '1':
        pop_mark();
        return;
      case '2':
        push(top());
        return;
      case 'N':
        push(make(Node::Kind::None));
        return;
      case 0x88:
      case 0x89: {
        const uint32_t i = make(Node::Kind::Bool);
        node(i).boolean = op == 0x88;
        push(i);
        return;
      }
      case 'K':
        push(make_int(static_cast<int64_t>(uint_le(1))));
        return;
      case 'M':
        push(make_int(static_cast<int64_t>(uint_le(2))));
        return;
      case 'J':
        push(make_int(static_cast<int32_t>(static_cast<uint32_t>(uint_le(4)))));
        return;
      case 0x8a:
        push(long_value(uint_le(1)));
        return;
      case 0x8b:
        push(long_value(uint_le(4)));
        return;
      case 'G': {
        const uint8_t* p = take(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | p[k];  // big-endian
        const uint32_t i = make(Node::Kind::Float);
        node(i).real = std::bit_cast<double>(bits);
        push(i);
        return;
      }
      case 'X':
        push(make_text(Node::Kind::Str, uint_le(4)));
        return;
      case 0x8c:
        push(make_text(Node::Kind::Str, uint_le(1)));
        return;
      case 0x8d:
        push(make_text(Node::Kind::Str, uint_le(8)));
        return;
      case 'T':  // Python 2 str, read as bytes
      case 'B':
        push(make_text(Node::Kind::Bytes, uint_le(4)));
        return;
      case 'U':
      case 'C':
        push(make_text(Node::Kind::Bytes, uint_le(1)));
        return;
      case 0x8e:
      case 0x96:
        push(make_text(Node::Kind::Bytes, uint_le(8)));
        return;  // BINBYTES8, BYTEARRAY8
      case ']':
        push(make(Node::Kind::List));
        return;
      case 'l': {
        std::vector<uint32_t> items = pop_mark();
        const uint32_t i = make(Node::Kind::List);
        node(i).items = std::move(items);
        push(i);
        return;
      }
      case 'a': {
        const uint32_t v = pop();
        expect(top(), Node::Kind::List, "APPEND").items.push_back(v);
        return;
      }
      case 'e': {
        std::vector<uint32_t> items = pop_mark();
        Node& list = expect(top(), Node::Kind::List, "APPENDS");
        list.items.insert(list.items.end(), items.begin(), items.end());
        return;
      }
      case ')':
        push(make_tuple({}));
        return;
      case 't':
        push(make_tuple(pop_mark()));
        return;
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84u;
        std::vector<uint32_t> items(n);
        for (size_t k = n; k-- > 0;) items[k] = pop();
        push(make_tuple(std::move(items)));
        return;
      }
      case '}':
        push(make(Node::Kind::Dict));
        return;
      case 'd':
      case 'u': {
        std::vector<uint32_t> items = pop_mark();
        if (items.size() % 2) fail("the pickle gives a dict an odd number of keys and values");
        const uint32_t dict = op == 'd' ? make(Node::Kind::Dict) : top();
        for (size_t k = 0; k < items.size(); k += 2) set_item(dict, items[k], items[k + 1]);
        if (op == 'd') push(dict);
        return;
      }
      case 's': {
        const uint32_t value = pop(), key = pop();
        set_item(top(), key, value);
        return;
      }
      case 'q':
        memo_put(uint_le(1));
        return;
      case 'r':
        memo_put(uint_le(4));
        return;
      case 0x94:
        memo_put(memo_.size());
        return;
      case 'h':
        memo_get(uint_le(1));
        return;
      case 'j':
        memo_get(uint_le(4));
        return;
      case 'c': {
        std::string module = line();
        std::string name = line();
        push(make_global(module, name));
        return;
      }
      case 0x93: {
        const uint32_t name = pop(), module = pop();
        if (node(name).kind != Node::Kind::Str || node(module).kind != Node::Kind::Str)
          fail("the pickle's STACK_GLOBAL names its global with something other than strings");
        push(make_global(node(module).text, node(name).text));
        return;
      }
      case 'R': {
        const uint32_t args = pop(), callable = pop();
        push(reduce(callable, args));
        return;
      }
      case 'b': {
        const uint32_t state = pop();
        build(top(), state);
        return;
      }
      default:
        fail("the pickle uses the opcode " + opcode_text(op) + " at byte " + std::to_string(at) +
             ", which is refused: only the opcodes that rebuild data (numbers, strings, lists, "
             "tuples, dicts, numpy arrays) are read, never ones that can run code");
    }
  }

  uint32_t long_value(uint64_t n) {
    if (n > 8)
      fail("the pickle holds an integer of " + std::to_string(n) + " bytes, wider than 64 bits");
    const uint8_t* p = take(n);
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = (v << 8) | p[k];
    if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return make_int(static_cast<int64_t>(v));
  }

  uint32_t make_global(const std::string& module, const std::string& name) {
    Global g;
    if (!lookup_global(module, name, g))
      fail("the pickle refers to the global '" + module + "." + name +
           "', which is refused: only numpy's array, dtype and scalar reconstructors are "
           "accepted (tarmac reads pickles as data and never runs what they name)");
    const uint32_t i = make(Node::Kind::Global);
    node(i).global = g;
    node(i).text = module + "." + name;
    return i;
  }

  // The tuple of a REDUCE's arguments, checked for count.
  const std::vector<uint32_t>& args_of(uint32_t args, size_t n, const std::string& fn) {
    const Node& t = expect(args, Node::Kind::Tuple, "REDUCE");
    if (t.items.size() != n)
      fail("the pickle calls " + fn + " with " + std::to_string(t.items.size()) +
           " arguments, not " + std::to_string(n));
    return t.items;
  }

  uint32_t reduce(uint32_t callable, uint32_t args) {
    const Node& c = node(callable);
    if (c.kind != Node::Kind::Global)
      fail(std::string("the pickle's REDUCE calls a ") + kind_name(c.kind) +
           ", which is not callable");
    const std::string fn = c.text;
    switch (c.global) {
      case Global::Reconstruct: {
        // _reconstruct(ndarray, (0,), b'b'): an empty array, filled by the BUILD that follows.
        const std::vector<uint32_t> a = args_of(args, 3, fn);
        const Node& type = node(a[0]);
        if (type.kind != Node::Kind::Global || type.global != Global::NdarrayType)
          fail("the pickle calls " + fn + " for something other than numpy.ndarray");
        return make(Node::Kind::Array);
      }
      case Global::DTypeType: {
        const std::vector<uint32_t> a = args_of(args, 3, fn);
        const uint32_t d = make(Node::Kind::DType);
        parse_dtype(expect(a[0], Node::Kind::Str, "numpy.dtype").text, d);
        return d;
      }
      case Global::Scalar: {
        // scalar(dtype, bytes): a numpy scalar, kept as a 0-d array.
        const std::vector<uint32_t> a = args_of(args, 2, fn);
        expect(a[0], Node::Kind::DType, fn.c_str());
        if (node(a[0]).dkind == 'O') fail("the pickle holds a numpy object scalar, refused");
        const std::string raw = expect(a[1], Node::Kind::Bytes, fn.c_str()).text;
        const uint32_t i = make(Node::Kind::Array);
        fill_array(i, a[0], {}, false, raw, nullptr);
        return i;
      }
      case Global::FromBuffer: {
        // _frombuffer(buffer, dtype, shape, order): protocol 5's in-band arrays.
        const std::vector<uint32_t> a = args_of(args, 4, fn);
        const std::string raw = expect(a[0], Node::Kind::Bytes, fn.c_str()).text;
        expect(a[1], Node::Kind::DType, fn.c_str());
        const std::vector<int64_t> shape = shape_of(a[2]);
        const std::string order = expect(a[3], Node::Kind::Str, fn.c_str()).text;
        if (order != "C" && order != "F")
          fail("the pickle asks for the array order '" + order + "'");
        if (node(a[1]).dkind == 'O') fail("the pickle holds an object array in a buffer, refused");
        const uint32_t i = make(Node::Kind::Array);
        fill_array(i, a[1], shape, order == "F", raw, nullptr);
        return i;
      }
      case Global::CodecsEncode: {
        // Protocol 2 writes bytes as _codecs.encode(str, 'latin1'): code points 0-255 -> bytes.
        const std::vector<uint32_t> a = args_of(args, 2, fn);
        const std::string& enc = expect(a[1], Node::Kind::Str, fn.c_str()).text;
        if (enc != "latin1" && enc != "latin-1")
          fail("the pickle calls _codecs.encode with the encoding '" + enc +
               "'; only latin1 is read");
        const std::string& s = expect(a[0], Node::Kind::Str, fn.c_str()).text;
        std::string out;
        out.reserve(s.size());
        for (size_t k = 0; k < s.size();) {
          const auto b0 = static_cast<uint8_t>(s[k]);
          if (b0 < 0x80) {
            out.push_back(static_cast<char>(b0));
            k += 1;
          } else if ((b0 == 0xC2 || b0 == 0xC3) && k + 1 < s.size()) {
            out.push_back(static_cast<char>(((b0 & 0x03) << 6) | (s[k + 1] & 0x3F)));
            k += 2;
          } else {
            fail("the pickle calls _codecs.encode on text outside latin1");
          }
        }
        const uint32_t i = make(Node::Kind::Bytes);
        node(i).text = std::move(out);
        return i;
      }
      case Global::Bytes:
        args_of(args, 0, fn);
        return make(Node::Kind::Bytes);
      case Global::NdarrayType:
        break;
    }
    fail("the pickle calls " + fn + ", which is refused");
  }

  // "f8", "<i4", "U6", "S3", "b1", "O8", ... (numpy writes the order in BUILD's state).
  void parse_dtype(const std::string& s, uint32_t d) {
    size_t p = 0;
    char order = '=';
    if (p < s.size() && (s[p] == '<' || s[p] == '>' || s[p] == '|' || s[p] == '=')) order = s[p++];
    if (p >= s.size()) fail("the pickle holds the dtype '" + s + "', which has no type code");
    const char kind = s[p++];
    size_t n = 0;
    const size_t digits = p;
    while (p < s.size() && s[p] >= '0' && s[p] <= '9' && n < 100'000'000)
      n = n * 10 + static_cast<size_t>(s[p++] - '0');
    const bool sized = p == s.size() && p > digits && n > 0;
    bool ok = sized;
    switch (kind) {
      case 'b':
        ok = ok && n == 1;
        break;
      case 'i':
      case 'u':
        ok = ok && (n == 1 || n == 2 || n == 4 || n == 8);
        break;
      case 'f':
        ok = ok && (n == 2 || n == 4 || n == 8);
        break;
      case 'U':
        n *= 4;
        break;
      case 'S':
      case 'O':
        break;
      default:
        ok = false;
    }
    if (kind == 'V') fail("the pickle holds the structured dtype '" + s + "', refused");
    if (!ok) fail("the pickle holds the dtype '" + s + "', which is not supported");
    Node& node_ = node(d);
    node_.dkind = kind;
    node_.itemsize = kind == 'O' ? 0 : n;
    node_.order = order;
  }

  std::vector<int64_t> shape_of(uint32_t t) {
    const Node& tuple = expect(t, Node::Kind::Tuple, "an array's shape");
    if (tuple.items.size() > kMaxDims) fail("the pickle holds an array of more than 64 dimensions");
    std::vector<int64_t> shape;
    for (uint32_t i : tuple.items) {
      const Node& dim = expect(i, Node::Kind::Int, "an array's shape");
      if (dim.integer < 0) fail("the pickle holds an array with a negative dimension");
      shape.push_back(dim.integer);
    }
    return shape;
  }

  // Sets array `a` from its dtype, shape, order and either raw bytes or (objects) a list.
  void fill_array(uint32_t a, uint32_t dtype, std::vector<int64_t> shape, bool fortran,
                  const std::string& raw, const std::vector<uint32_t>* objects) {
    const Node& d = node(dtype);
    uint64_t count = 1;
    for (int64_t dim : shape)
      if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count) ||
          count > static_cast<uint64_t>(INT64_MAX))
        fail("the pickle holds an array with more elements than can be counted");
    std::vector<uint64_t> order;  // C index -> stored index, for Fortran arrays
    auto source = [&](uint64_t c) { return order.empty() ? c : order[c]; };
    if (d.dkind == 'O') {
      if (!objects) fail("the pickle gives an object array raw bytes instead of a list");
      if (objects->size() != count)
        fail("the pickle holds an object array of " + std::to_string(count) + " elements with " +
             std::to_string(objects->size()) + " values");
    } else {
      if (objects) fail("the pickle gives a numeric array a list instead of its bytes");
      uint64_t need = 0;
      if (__builtin_mul_overflow(count, uint64_t{d.itemsize}, &need) || need != raw.size())
        fail("the pickle holds an array whose data is " + std::to_string(raw.size()) +
             " bytes where its shape and dtype need " +
             (need == 0 && count ? std::string("more") : std::to_string(need)));
    }
    if (fortran && shape.size() > 1 && count > 1) order = fortran_order(shape, count);
    Node& out = node(a);
    if (out.built) fail("the pickle sets the state of an array twice");
    out.built = true;
    out.dtype = dtype;
    out.shape = std::move(shape);
    if (d.dkind == 'O') {
      for (uint64_t c = 0; c < count; ++c) out.items.push_back((*objects)[source(c)]);
      return;
    }
    const size_t size = d.itemsize;
    out.data.resize(raw.size());
    for (uint64_t c = 0; c < count; ++c)
      std::memcpy(out.data.data() + c * size, raw.data() + source(c) * size, size);
    if (d.order == '>' && d.dkind != 'S' && d.dkind != 'b') {
      const size_t unit = d.dkind == 'U' ? 4 : size;
      for (size_t k = 0; k + unit <= out.data.size(); k += unit)
        std::reverse(out.data.begin() + static_cast<ptrdiff_t>(k),
                     out.data.begin() + static_cast<ptrdiff_t>(k + unit));
    }
    if (d.dkind == 'b')
      for (uint8_t& b : out.data) b = b != 0;
  }

  // For each element in C order, where it sits in Fortran order.
  static std::vector<uint64_t> fortran_order(const std::vector<int64_t>& shape, uint64_t count) {
    const size_t nd = shape.size();
    std::vector<uint64_t> stride(nd), idx(nd, 0), out(count);
    uint64_t s = 1;
    for (size_t k = 0; k < nd; ++k) {
      stride[k] = s;
      s *= static_cast<uint64_t>(shape[k]);
    }
    uint64_t f = 0;
    for (uint64_t c = 0; c < count; ++c) {
      out[c] = f;
      for (size_t k = nd; k-- > 0;) {
        if (++idx[k] < static_cast<uint64_t>(shape[k])) {
          f += stride[k];
          break;
        }
        f -= (idx[k] - 1) * stride[k];
        idx[k] = 0;
      }
    }
    return out;
  }

  void build(uint32_t target, uint32_t state) {
    Node& t = node(target);
    if (t.kind == Node::Kind::DType) {
      // (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
      const Node& s = expect(state, Node::Kind::Tuple, "a dtype's BUILD");
      if (s.items.size() < 8 || s.items.size() > 9)
        fail("the pickle sets a dtype's state with " + std::to_string(s.items.size()) +
             " values, not 8 or 9");
      const std::string order = expect(s.items[1], Node::Kind::Str, "a dtype's byte order").text;
      if (order.size() != 1 || std::string_view("<>|=").find(order[0]) == std::string_view::npos)
        fail("the pickle holds the dtype byte order '" + order + "'");
      for (size_t k = 2; k <= 4; ++k)
        if (node(s.items[k]).kind != Node::Kind::None)
          fail(
              "the pickle holds a structured or sub-array dtype, refused: save each field as "
              "its own array");
      node(target).order = order[0];
      return;
    }
    if (t.kind != Node::Kind::Array || t.built)
      fail(std::string("the pickle's BUILD sets the state of a ") + kind_name(t.kind) +
           ", refused: only numpy arrays and dtypes are rebuilt");
    // (version, shape, dtype, is_fortran, data) or without the version
    const Node& s = expect(state, Node::Kind::Tuple, "an array's BUILD");
    if (s.items.size() != 4 && s.items.size() != 5)
      fail("the pickle sets an array's state with " + std::to_string(s.items.size()) +
           " values, not 4 or 5");
    const size_t o = s.items.size() - 4;
    const std::vector<uint32_t> items = s.items;
    std::vector<int64_t> shape = shape_of(items[o]);
    expect(items[o + 1], Node::Kind::DType, "an array's state");
    const bool fortran = expect(items[o + 2], Node::Kind::Bool, "an array's order").boolean;
    const Node& data = node(items[o + 3]);
    if (data.kind == Node::Kind::List) {
      const std::vector<uint32_t> objects = data.items;
      fill_array(target, items[o + 1], std::move(shape), fortran, {}, &objects);
    } else {
      const std::string raw = expect(items[o + 3], Node::Kind::Bytes, "an array's data").text;
      fill_array(target, items[o + 1], std::move(shape), fortran, raw, nullptr);
    }
  }

  // --- the value tree handed out: a copy, bounded in depth and size ---
  PickleValue convert(uint32_t i, int depth) {
    if (depth > kMaxDepth)
      fail("the pickle nests deeper than " + std::to_string(kMaxDepth) +
           " levels (or holds a container inside itself)");
    if (++out_nodes_ > 2 * static_cast<uint64_t>(in_.size()) + 256)
      fail(
          "the pickle refers to the same containers so often that its value would be far "
          "larger than the file");
    const Node& n = node(i);
    PickleValue v;
    auto charge = [&](size_t bytes) {
      out_bytes_ += bytes;
      if (out_bytes_ > 64 * static_cast<uint64_t>(in_.size()) + (1u << 20))
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

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  std::deque<Node> nodes_;  // a deque: references to nodes stay valid as it grows
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  uint64_t out_nodes_ = 0;
  uint64_t out_bytes_ = 0;
};

}  // namespace

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

PickleValue unpickle(std::span<const uint8_t> bytes) {
  return Unpickler(bytes).run();
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
