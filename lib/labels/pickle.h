#pragma once
// A restricted unpickler for the data inside NumPy object arrays (np.save with allow_pickle):
// dicts, lists, tuples, strings, bytes, numbers and numpy arrays/dtypes/scalars. It interprets
// the opcodes as data and calls nothing: any global outside a short allow-list of numpy
// reconstructors (os.system, builtins.eval, ...) and any opcode that could run code is refused.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tarmac {

/// One Python value of an unpickled tree.
struct PickleValue {
  enum class Type { None, Bool, Int, Float, Str, Bytes, List, Tuple, Dict, Array };
  Type type = Type::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  /// Str: UTF-8 text. Bytes: the bytes. Array: the dtype, little-endian or '|' ("<f8", "|b1",
  /// "|u1", "<U6", "|S3", "|O").
  std::string text;
  /// List and Tuple: the items. Dict: the values (keys in `keys`). Array of dtype "|O": its
  /// elements in C order.
  std::vector<PickleValue> items;
  std::vector<PickleValue> keys;  ///< Dict: the keys, in insertion order
  std::vector<int64_t> shape;     ///< Array: {} for a numpy scalar or a 0-d array
  std::vector<uint8_t> data;      ///< Array (not "|O"): elements, little-endian, C order

  /// Array: element count (1 for a 0-d array). Never overflows: the unpickler checked.
  uint64_t num_elements() const;
  /// Dict: the value under the string key `key`, or nullptr.
  const PickleValue* find(const std::string& key) const;
};

/// "None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "ndarray".
const char* pickle_type_name(PickleValue::Type t);

/// Unpickles `bytes` (protocols 2 to 5). Throws ParseError naming the refused global or opcode,
/// or what is malformed (truncated, a stack underflow, an array whose data does not match its
/// shape, a structured or datetime dtype, nesting deeper than 64, ...).
PickleValue unpickle(std::span<const uint8_t> bytes);

/// Element `i` of a "<U…" or "|S…" array as UTF-8, trailing NULs stripped as numpy does.
/// Throws ParseError for an invalid code point or bytes that are not UTF-8.
std::string pickle_array_string(const PickleValue& array, uint64_t i);

}  // namespace tarmac
