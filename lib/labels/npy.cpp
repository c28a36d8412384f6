#include "labels/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"

namespace tarmac {

static_assert(std::endian::native == std::endian::little,
              "values are stored by memcpy on a little-endian host");

namespace {

constexpr size_t kMaxDims = 64;       // NumPy 2 allows 64 dimensions, NumPy 1 allows 32
constexpr int kMaxHeaderNesting = 8;  // a structured descr nests a few levels; the rest is hostile
constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// A value of the Python literal subset that .npy headers use.
struct PyValue {
  enum class Type { Str, Int, Bool, None, Tuple, List };
  Type type = Type::None;
  std::string str;
  bool negative = false;
  uint64_t magnitude = 0;  // of an Int; parsing fails past UINT64_MAX
  bool boolean = false;
  std::vector<PyValue> items;
};

using PyDict = std::vector<std::pair<std::string, PyValue>>;

// Parses the header's dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),
// } strictly: strings, ints, True/False/None, tuples and lists, nothing that needs evaluation.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  PyDict parse_dict() {
    PyDict dict;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (eat('}')) break;
      if (peek() != '\'' && peek() != '"') fail("a key that is not a string");
      std::string key = parse_string();
      skip_space();
      expect(':');
      PyValue value = parse_value(1);
      dict.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (eat(',')) continue;
      expect('}');
      break;
    }
    skip_space();
    if (pos_ != text_.size()) fail("text after the closing brace");
    return dict;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw ParseError("the .npy header is not a valid dict literal: found " + std::string(what) +
                     " at offset " + std::to_string(pos_));
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (pos_ >= text_.size())
      fail("the end of the header where '" + std::string(1, c) + "' was expected");
    if (!eat(c)) fail("an unexpected character where '" + std::string(1, c) + "' was expected");
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r' || text_[pos_] == '\f' || text_[pos_] == '\v'))
      ++pos_;
  }

  std::string parse_string() {
    const char quote = text_[pos_++];
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) fail("an unterminated string");
      const char c = text_[pos_++];
      if (c == quote) return out;
      if (c == '\\') fail("an escape sequence in a string");
      if (c == '\n') fail("a newline in a string");
      out.push_back(c);
    }
  }

  PyValue parse_value(int depth) {
    if (depth > kMaxHeaderNesting) fail("nesting deeper than the format allows");
    skip_space();
    const char c = peek();
    if (c == '\'' || c == '"') {
      PyValue v;
      v.type = PyValue::Type::Str;
      v.str = parse_string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_int();
    if (c == '(') return parse_sequence(')', PyValue::Type::Tuple, depth);
    if (c == '[') return parse_sequence(']', PyValue::Type::List, depth);
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    const std::string_view word = text_.substr(start, pos_ - start);
    PyValue v;
    if (word == "True" || word == "False") {
      v.type = PyValue::Type::Bool;
      v.boolean = word == "True";
      return v;
    }
    if (word == "None") return v;
    pos_ = start;
    fail(pos_ < text_.size() ? "an unexpected character where a value was expected"
                             : "the end of the header");
  }

  PyValue parse_int() {
    PyValue v;
    v.type = PyValue::Type::Int;
    v.negative = eat('-');
    if (!(peek() >= '0' && peek() <= '9')) fail("a '-' without digits");
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (v.magnitude > (UINT64_MAX - digit) / 10) fail("an integer too large to be a dimension");
      v.magnitude = v.magnitude * 10 + digit;
      ++pos_;
    }
    // Python 2 wrote longs as 3L; NumPy still reads such headers.
    if (!eat('L')) eat('l');
    if (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '.')
      fail("a malformed integer");
    return v;
  }

  // A tuple needs a comma unless empty: (3) is the int 3, as in Python.
  PyValue parse_sequence(char close, PyValue::Type type, int depth) {
    ++pos_;
    PyValue seq;
    seq.type = type;
    skip_space();
    if (eat(close)) return seq;
    PyValue first = parse_value(depth + 1);
    skip_space();
    if (type == PyValue::Type::Tuple && eat(')')) return first;
    seq.items.push_back(std::move(first));
    for (;;) {
      skip_space();
      if (eat(close)) return seq;
      expect(',');
      skip_space();
      if (eat(close)) return seq;
      seq.items.push_back(parse_value(depth + 1));
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

struct Descr {
  enum class Base { Numeric, Unicode, Bytes };
  Base base = Base::Numeric;
  DType dtype = DType::U8;
  size_t itemsize = 0;
  size_t swap_unit =
      1;  // bytes per byte-swapped unit when big-endian: the element, or 4 for UTF-32
  bool big_endian = false;
};

Descr parse_descr(const std::string& s) {
  if (s.empty()) throw ParseError("the .npy header has an empty 'descr'");
  size_t pos = 0;
  char order = '=';
  if (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=') order = s[pos++];
  if (pos >= s.size()) throw ParseError("the .npy dtype '" + s + "' has no type code");
  const char code = s[pos++];
  switch (code) {
    case 'O':
      throw ParseError(
          "object arrays are refused: tarmac never unpickles; save numeric or string arrays "
          "instead");
    case 'c':
      throw ParseError(
          "complex arrays are not supported; save the real and imaginary parts as two arrays");
    case 'M':
    case 'm':
      throw ParseError("datetime and timedelta arrays are not supported; save them as integers");
    case 'V':
      throw ParseError(
          "void and structured arrays are not supported; save each field as its own array");
    default:
      break;
  }
  size_t n = 0;
  const size_t digits_at = pos;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
    if (n > 1'000'000'000) throw ParseError("the .npy dtype '" + s + "' has an absurd item size");
    n = n * 10 + static_cast<size_t>(s[pos++] - '0');
  }
  if (pos != s.size() || pos == digits_at)
    throw ParseError("the .npy dtype '" + s + "' is not a supported dtype");
  if (n == 0)
    throw ParseError("the .npy dtype '" + s + "' has item size 0, which is not supported");

  Descr d;
  d.big_endian = order == '>';
  d.itemsize = n;
  d.swap_unit = n;
  auto pick = [&](std::initializer_list<std::pair<size_t, DType>> sizes) {
    for (const auto& [size, type] : sizes)
      if (size == n) {
        d.dtype = type;
        return;
      }
    throw ParseError("the .npy dtype '" + s + "' is not supported");
  };
  switch (code) {
    case 'b':
      pick({{1, DType::BOOL}});
      break;
    case 'i':
      pick({{1, DType::I8}, {2, DType::I16}, {4, DType::I32}, {8, DType::I64}});
      break;
    case 'u':
      pick({{1, DType::U8}, {2, DType::U16}, {4, DType::U32}, {8, DType::U64}});
      break;
    case 'f':
      pick({{2, DType::F16}, {4, DType::F32}, {8, DType::F64}});
      break;
    case 'U':
      d.base = Descr::Base::Unicode;
      d.itemsize = n * 4;
      d.swap_unit = 4;
      break;
    case 'S':
    case 'a':
      d.base = Descr::Base::Bytes;
      d.swap_unit = 1;
      break;
    default:
      throw ParseError("the .npy dtype '" + s + "' is not supported");
  }
  return d;
}

// Python tuple notation, as numpy prints shapes: "(3,)", "(2, 3)".
std::string numpy_shape_text(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + (shape.size() == 1 ? ",)" : ")");
}

void byte_swap(std::vector<uint8_t>& data, size_t unit) {
  if (unit < 2) return;
  for (size_t i = 0; i + unit <= data.size(); i += unit)
    std::reverse(data.begin() + i, data.begin() + i + unit);
}

// Reorders elements from Fortran (first index fastest) to C order (last index fastest).
std::vector<uint8_t> fortran_to_c(const std::vector<uint8_t>& src,
                                  const std::vector<int64_t>& shape, size_t itemsize,
                                  uint64_t count) {
  std::vector<uint8_t> out(src.size());
  const size_t nd = shape.size();
  std::vector<uint64_t> fstride(nd), idx(nd, 0);
  uint64_t stride = 1;
  for (size_t k = 0; k < nd; ++k) {
    fstride[k] = stride;
    stride *= static_cast<uint64_t>(shape[k]);
  }
  uint64_t foff = 0;
  for (uint64_t c = 0; c < count; ++c) {
    std::memcpy(out.data() + c * itemsize, src.data() + foff * itemsize, itemsize);
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < static_cast<uint64_t>(shape[k])) {
        foff += fstride[k];
        break;
      }
      foff -= (idx[k] - 1) * fstride[k];
      idx[k] = 0;
    }
  }
  return out;
}

// One element of a 'U' or 'S' array as UTF-8, trailing NULs stripped as NumPy does.
std::string element_text(const Descr& d, const uint8_t* p) {
  std::string out;
  if (d.base == Descr::Base::Bytes) {
    size_t len = d.itemsize;
    while (len > 0 && p[len - 1] == 0) --len;
    if (!is_valid_utf8({p, len}))
      throw ParseError("the .npy bytes array holds text that is not valid UTF-8");
    out.assign(reinterpret_cast<const char*>(p), len);
    return out;
  }
  size_t units = d.itemsize / 4;
  auto unit = [&](size_t i) {
    uint32_t cp;
    std::memcpy(&cp, p + 4 * i, 4);
    return cp;
  };
  while (units > 0 && unit(units - 1) == 0) --units;
  for (size_t i = 0; i < units; ++i) {
    const uint32_t cp = unit(i);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "U+%X", cp);
      throw ParseError(std::string("the .npy unicode array holds the invalid code point ") + hex);
    }
    append_utf8(out, cp);
  }
  return out;
}

void append_json_lists(std::string& out, const std::vector<std::string>& items,
                       const std::vector<int64_t>& shape, size_t dim, size_t& next) {
  if (dim == shape.size()) {
    out += nlohmann::json(items[next++]).dump();
    return;
  }
  out.push_back('[');
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i) out.push_back(',');
    append_json_lists(out, items, shape, dim + 1, next);
  }
  out.push_back(']');
}

FieldValue text_value(const Descr& d, const std::vector<uint8_t>& data,
                      const std::vector<int64_t>& shape, uint64_t count, size_t input_size) {
  std::vector<std::string> items;
  items.reserve(count);
  for (uint64_t i = 0; i < count; ++i)
    items.push_back(element_text(d, data.data() + i * d.itemsize));
  FieldValue v;
  if (count == 1) {
    v.kind = FieldValue::Kind::String;
    v.dtype = DType::U8;
    v.shape = {static_cast<int64_t>(items[0].size())};
    v.data.assign(items[0].begin(), items[0].end());
    return v;
  }
  if (count == 0) {
    // Only the lists before the first zero dimension get written; a hostile shape like
    // (2**60, 0) would make that text huge from a tiny file.
    uint64_t lists = 1;
    for (int64_t dim : shape) {
      if (dim == 0) break;
      lists *= static_cast<uint64_t>(dim);
      if (lists > input_size)
        throw ParseError("the .npy shape " + numpy_shape_text(shape) +
                         " is too large for an empty string array");
    }
  }
  std::string text;
  size_t next = 0;
  append_json_lists(text, items, shape, 0, next);
  v.kind = FieldValue::Kind::Json;
  v.dtype = DType::U8;
  v.shape = {static_cast<int64_t>(text.size())};
  v.data.assign(text.begin(), text.end());
  return v;
}

}  // namespace

NpyHeader parse_npy_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < 10 || !std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin())) {
    if (bytes.size() >= 6 && std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin()))
      throw ParseError("the .npy file is truncated inside its preamble");
    throw ParseError("the file is not a .npy array (it does not start with \\x93NUMPY)");
  }
  const unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    throw ParseError("the .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor) + " is not supported (only 1.0, 2.0 and 3.0 are)");
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
    header_at = 10;
  } else {
    if (bytes.size() < 12) throw ParseError("the .npy file is truncated inside its preamble");
    header_len =
        bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) | (size_t{bytes[11]} << 24);
    header_at = 12;
  }
  if (header_len > bytes.size() - header_at)
    throw ParseError("the .npy header is truncated: it declares " + std::to_string(header_len) +
                     " bytes but only " + std::to_string(bytes.size() - header_at) + " follow");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_at),
                                header_len);

  const PyDict dict = HeaderParser(header).parse_dict();
  const PyValue *descr = nullptr, *fortran = nullptr, *shape_value = nullptr;
  for (const auto& [key, value] : dict) {
    const PyValue** slot = key == "descr"           ? &descr
                           : key == "fortran_order" ? &fortran
                           : key == "shape"         ? &shape_value
                                                    : nullptr;
    if (!slot) throw ParseError("the .npy header has an unexpected key '" + key + "'");
    if (*slot) throw ParseError("the .npy header repeats the key '" + key + "'");
    *slot = &value;
  }
  if (!descr) throw ParseError("the .npy header has no 'descr' key");
  if (!fortran) throw ParseError("the .npy header has no 'fortran_order' key");
  if (!shape_value) throw ParseError("the .npy header has no 'shape' key");
  if (descr->type == PyValue::Type::List)
    throw ParseError("structured dtypes are not supported; save each field as its own array");
  if (descr->type != PyValue::Type::Str)
    throw ParseError("the .npy header's 'descr' is not a string");
  if (fortran->type != PyValue::Type::Bool)
    throw ParseError("the .npy header's 'fortran_order' is not True or False");
  if (shape_value->type != PyValue::Type::Tuple)
    throw ParseError("the .npy header's 'shape' is not a tuple");
  if (shape_value->items.size() > kMaxDims)
    throw ParseError("the .npy array has " + std::to_string(shape_value->items.size()) +
                     " dimensions, more than " + std::to_string(kMaxDims));

  std::vector<int64_t> shape;
  uint64_t count = 1;
  for (const PyValue& dim : shape_value->items) {
    if (dim.type != PyValue::Type::Int)
      throw ParseError("the .npy header's 'shape' holds something other than integers");
    if (dim.negative && dim.magnitude != 0)
      throw ParseError("the .npy header's 'shape' has a negative dimension");
    if (dim.magnitude > static_cast<uint64_t>(INT64_MAX))
      throw ParseError("the .npy header's 'shape' has a dimension too large to count");
    shape.push_back(static_cast<int64_t>(dim.magnitude));
    // Checked at every step, so that FieldValue::num_elements() can never overflow either.
    if (__builtin_mul_overflow(count, dim.magnitude, &count) ||
        count > static_cast<uint64_t>(INT64_MAX))
      throw ParseError("the .npy shape " + numpy_shape_text(shape) +
                       "... has more elements than can be counted");
  }
  NpyHeader h;
  h.descr = descr->str;
  h.fortran_order = fortran->boolean;
  h.shape = std::move(shape);
  h.data_offset = header_at + header_len;
  return h;
}

FieldValue parse_npy(std::span<const uint8_t> bytes) {
  const NpyHeader h = parse_npy_header(bytes);
  const Descr d = parse_descr(h.descr);
  std::vector<int64_t> shape = h.shape;
  uint64_t count = 1;
  for (int64_t dim : shape) count *= static_cast<uint64_t>(dim);
  uint64_t need = 0;
  if (__builtin_mul_overflow(count, uint64_t{d.itemsize}, &need))
    throw ParseError("the .npy shape " + numpy_shape_text(shape) +
                     " is too large to hold in memory");
  const size_t have = bytes.size() - h.data_offset;
  if (need > have)
    throw ParseError("the .npy data is truncated: shape " + numpy_shape_text(shape) + " of '" +
                     h.descr + "' needs " + std::to_string(need) + " bytes but only " +
                     std::to_string(have) + " follow the header");
  if (need < have)
    throw ParseError("the .npy file has " + std::to_string(have - need) +
                     " bytes after the array data; it is corrupt or not what its header says");

  std::vector<uint8_t> data(bytes.begin() + static_cast<ptrdiff_t>(h.data_offset), bytes.end());
  if (d.big_endian) byte_swap(data, d.swap_unit);
  if (h.fortran_order && shape.size() > 1 && count > 1)
    data = fortran_to_c(data, shape, d.itemsize, count);

  if (d.base != Descr::Base::Numeric) return text_value(d, data, shape, count, bytes.size());

  FieldValue v;
  v.kind = FieldValue::Kind::Numeric;
  v.dtype = d.dtype;
  v.shape = std::move(shape);
  if (d.dtype == DType::BOOL)
    for (uint8_t& b : data) b = b != 0;
  v.data = std::move(data);
  return v;
}

}  // namespace tarmac
