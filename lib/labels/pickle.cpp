// The opcode machine of the restricted unpickler: reads the opcodes of protocols 2 to 5 with
// every read bounds-checked, keeps the stack, the MARKs and the memo, and refuses every opcode
// that could run code. The objects it makes live in an Arena (pickle_value.cpp); numpy's
// reconstructors are interpreted in pickle_numpy.cpp.
#include "labels/pickle.h"

#include <bit>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/utf8.h"
#include "labels/pickle_internal.h"

namespace tarmac {

namespace {

using pickle_detail::Arena;
using pickle_detail::build;
using pickle_detail::fail;
using pickle_detail::make_global;
using pickle_detail::Node;
using pickle_detail::reduce;
using pickle_detail::to_value;

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
    return to_value(arena_, stack_.back(), in_.size());
  }

 private:
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
  uint32_t make(Node::Kind kind) { return arena_.make(kind); }
  Node& node(uint32_t i) { return arena_.node(i); }
  Node& expect(uint32_t i, Node::Kind kind, const char* what) {
    return arena_.expect(i, kind, what);
  }
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
        push(make_global(arena_, module, name));
        return;
      }
      case 0x93: {
        const uint32_t name = pop(), module = pop();
        if (node(name).kind != Node::Kind::Str || node(module).kind != Node::Kind::Str)
          fail("the pickle's STACK_GLOBAL names its global with something other than strings");
        push(make_global(arena_, node(module).text, node(name).text));
        return;
      }
      case 'R': {
        const uint32_t args = pop(), callable = pop();
        push(reduce(arena_, callable, args));
        return;
      }
      case 'b': {
        const uint32_t state = pop();
        build(arena_, top(), state);
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

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  Arena arena_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

}  // namespace

PickleValue unpickle(std::span<const uint8_t> bytes) {
  return Unpickler(bytes).run();
}

}  // namespace tarmac
