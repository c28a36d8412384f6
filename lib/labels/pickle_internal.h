#pragma once
// Internals of the restricted unpickler (labels/pickle.h), shared by its three files: the opcode
// machine (pickle.cpp) builds an object graph in an Arena, the numpy reconstructors
// (pickle_numpy.cpp) rebuild arrays and dtypes from the allow-listed globals, and
// pickle_value.cpp owns the graph's nodes and copies the finished graph out as a PickleValue.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "labels/pickle.h"

namespace tarmac::pickle_detail {

/// The only callables a pickle may name. Each is interpreted, never called.
enum class Global { Reconstruct, NdarrayType, DTypeType, Scalar, CodecsEncode, FromBuffer, Bytes };

/// An object while unpickling. Objects live in one Arena and refer to each other by index, so
/// that the memo can share them and a hostile cycle (a list holding itself) cannot leak.
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
  pickle_detail::Global global = pickle_detail::Global::Reconstruct;
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

/// "None", "int", ..., "ndarray", "global", "dtype": for error messages.
const char* kind_name(Node::Kind k);

/// Throws ParseError(what): every refusal of the unpickler goes through here.
[[noreturn]] void fail(const std::string& what);

/// The nodes of one unpickling, addressed by index. A deque: a reference to one node stays
/// valid while another is made.
class Arena {
 public:
  /// A new node of `kind`; its index. Every node costs at least one opcode byte, so the arena
  /// is bounded by the input.
  uint32_t make(Node::Kind kind);
  Node& node(uint32_t i) { return nodes_[i]; }
  const Node& node(uint32_t i) const { return nodes_[i]; }
  /// Node `i`, which must be of `kind`: fails naming `what` was given the wrong kind.
  Node& expect(uint32_t i, Node::Kind kind, const char* what);

 private:
  std::deque<Node> nodes_;
};

// --- numpy reconstruction (pickle_numpy.cpp) ---

/// A Global node for `module.name`; fails unless it is on the allow-list.
uint32_t make_global(Arena& arena, const std::string& module, const std::string& name);
/// REDUCE: interprets `callable` (a Global node) on the tuple `args`; the node it makes.
uint32_t reduce(Arena& arena, uint32_t callable, uint32_t args);
/// BUILD: sets the state of the dtype or the not yet built array `target`.
void build(Arena& arena, uint32_t target, uint32_t state);

// --- the value handed out (pickle_value.cpp) ---

/// A copy of the graph under `root` as a PickleValue, bounded in depth and, relative to
/// `input_size` (the pickle's length), in nodes and bytes.
PickleValue to_value(const Arena& arena, uint32_t root, size_t input_size);

}  // namespace tarmac::pickle_detail
