// The numpy side of the restricted unpickler: the allow-list of globals, and the
// reconstruction of arrays, dtypes and scalars from REDUCE and BUILD. Everything a pickle names
// is interpreted here as data; nothing is imported or called.
#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>

#include "labels/pickle_internal.h"

namespace tarmac::pickle_detail {

static_assert(std::endian::native == std::endian::little,
              "array data is stored by memcpy on a little-endian host");

namespace {

constexpr size_t kMaxDims = 64;

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

// The tuple of a REDUCE's arguments, checked for count.
const std::vector<uint32_t>& args_of(Arena& arena, uint32_t args, size_t n, const std::string& fn) {
  const Node& t = arena.expect(args, Node::Kind::Tuple, "REDUCE");
  if (t.items.size() != n)
    fail("the pickle calls " + fn + " with " + std::to_string(t.items.size()) + " arguments, not " +
         std::to_string(n));
  return t.items;
}

// "f8", "<i4", "U6", "S3", "b1", "O8", ... (numpy writes the order in BUILD's state).
void parse_dtype(Arena& arena, const std::string& s, uint32_t d) {
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
  Node& node_ = arena.node(d);
  node_.dkind = kind;
  node_.itemsize = kind == 'O' ? 0 : n;
  node_.order = order;
}

std::vector<int64_t> shape_of(Arena& arena, uint32_t t) {
  const Node& tuple = arena.expect(t, Node::Kind::Tuple, "an array's shape");
  if (tuple.items.size() > kMaxDims) fail("the pickle holds an array of more than 64 dimensions");
  std::vector<int64_t> shape;
  for (uint32_t i : tuple.items) {
    const Node& dim = arena.expect(i, Node::Kind::Int, "an array's shape");
    if (dim.integer < 0) fail("the pickle holds an array with a negative dimension");
    shape.push_back(dim.integer);
  }
  return shape;
}

// For each element in C order, where it sits in Fortran order.
std::vector<uint64_t> fortran_order(const std::vector<int64_t>& shape, uint64_t count) {
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

// Sets array `a` from its dtype, shape, order and either raw bytes or (objects) a list.
void fill_array(Arena& arena, uint32_t a, uint32_t dtype, std::vector<int64_t> shape, bool fortran,
                const std::string& raw, const std::vector<uint32_t>* objects) {
  const Node& d = arena.node(dtype);
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
  Node& out = arena.node(a);
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

// _codecs.encode(s, 'latin1'): the UTF-8 text `s`, whose code points must all be below 256,
// as one byte per code point.
std::string latin1_bytes(const std::string& s) {
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
  return out;
}

}  // namespace

uint32_t make_global(Arena& arena, const std::string& module, const std::string& name) {
  Global g;
  if (!lookup_global(module, name, g))
    fail("the pickle refers to the global '" + module + "." + name +
         "', which is refused: only numpy's array, dtype and scalar reconstructors are "
         "accepted (tarmac reads pickles as data and never runs what they name)");
  const uint32_t i = arena.make(Node::Kind::Global);
  arena.node(i).global = g;
  arena.node(i).text = module + "." + name;
  return i;
}

uint32_t reduce(Arena& arena, uint32_t callable, uint32_t args) {
  const Node& c = arena.node(callable);
  if (c.kind != Node::Kind::Global)
    fail(std::string("the pickle's REDUCE calls a ") + kind_name(c.kind) +
         ", which is not callable");
  const std::string fn = c.text;
  switch (c.global) {
    case Global::Reconstruct: {
      // _reconstruct(ndarray, (0,), b'b'): an empty array, filled by the BUILD that follows.
      const std::vector<uint32_t> a = args_of(arena, args, 3, fn);
      const Node& type = arena.node(a[0]);
      if (type.kind != Node::Kind::Global || type.global != Global::NdarrayType)
        fail("the pickle calls " + fn + " for something other than numpy.ndarray");
      return arena.make(Node::Kind::Array);
    }
    case Global::DTypeType: {
      const std::vector<uint32_t> a = args_of(arena, args, 3, fn);
      const uint32_t d = arena.make(Node::Kind::DType);
      parse_dtype(arena, arena.expect(a[0], Node::Kind::Str, "numpy.dtype").text, d);
      return d;
    }
    case Global::Scalar: {
      // scalar(dtype, bytes): a numpy scalar, kept as a 0-d array.
      const std::vector<uint32_t> a = args_of(arena, args, 2, fn);
      arena.expect(a[0], Node::Kind::DType, fn.c_str());
      if (arena.node(a[0]).dkind == 'O') fail("the pickle holds a numpy object scalar, refused");
      const std::string raw = arena.expect(a[1], Node::Kind::Bytes, fn.c_str()).text;
      const uint32_t i = arena.make(Node::Kind::Array);
      fill_array(arena, i, a[0], {}, false, raw, nullptr);
      return i;
    }
    case Global::FromBuffer: {
      // _frombuffer(buffer, dtype, shape, order): protocol 5's in-band arrays.
      const std::vector<uint32_t> a = args_of(arena, args, 4, fn);
      const std::string raw = arena.expect(a[0], Node::Kind::Bytes, fn.c_str()).text;
      arena.expect(a[1], Node::Kind::DType, fn.c_str());
      const std::vector<int64_t> shape = shape_of(arena, a[2]);
      const std::string order = arena.expect(a[3], Node::Kind::Str, fn.c_str()).text;
      if (order != "C" && order != "F") fail("the pickle asks for the array order '" + order + "'");
      if (arena.node(a[1]).dkind == 'O')
        fail("the pickle holds an object array in a buffer, refused");
      const uint32_t i = arena.make(Node::Kind::Array);
      fill_array(arena, i, a[1], shape, order == "F", raw, nullptr);
      return i;
    }
    case Global::CodecsEncode: {
      // Protocol 2 writes bytes as _codecs.encode(str, 'latin1'): code points 0-255 -> bytes.
      const std::vector<uint32_t> a = args_of(arena, args, 2, fn);
      const std::string& enc = arena.expect(a[1], Node::Kind::Str, fn.c_str()).text;
      if (enc != "latin1" && enc != "latin-1")
        fail("the pickle calls _codecs.encode with the encoding '" + enc +
             "'; only latin1 is read");
      std::string out = latin1_bytes(arena.expect(a[0], Node::Kind::Str, fn.c_str()).text);
      const uint32_t i = arena.make(Node::Kind::Bytes);
      arena.node(i).text = std::move(out);
      return i;
    }
    case Global::Bytes:
      args_of(arena, args, 0, fn);
      return arena.make(Node::Kind::Bytes);
    case Global::NdarrayType:
      break;
  }
  fail("the pickle calls " + fn + ", which is refused");
}

void build(Arena& arena, uint32_t target, uint32_t state) {
  Node& t = arena.node(target);
  if (t.kind == Node::Kind::DType) {
    // (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
    const Node& s = arena.expect(state, Node::Kind::Tuple, "a dtype's BUILD");
    if (s.items.size() < 8 || s.items.size() > 9)
      fail("the pickle sets a dtype's state with " + std::to_string(s.items.size()) +
           " values, not 8 or 9");
    const std::string order =
        arena.expect(s.items[1], Node::Kind::Str, "a dtype's byte order").text;
    if (order.size() != 1 || std::string_view("<>|=").find(order[0]) == std::string_view::npos)
      fail("the pickle holds the dtype byte order '" + order + "'");
    for (size_t k = 2; k <= 4; ++k)
      if (arena.node(s.items[k]).kind != Node::Kind::None)
        fail(
            "the pickle holds a structured or sub-array dtype, refused: save each field as "
            "its own array");
    arena.node(target).order = order[0];
    return;
  }
  if (t.kind != Node::Kind::Array || t.built)
    fail(std::string("the pickle's BUILD sets the state of a ") + kind_name(t.kind) +
         ", refused: only numpy arrays and dtypes are rebuilt");
  // (version, shape, dtype, is_fortran, data) or without the version
  const Node& s = arena.expect(state, Node::Kind::Tuple, "an array's BUILD");
  if (s.items.size() != 4 && s.items.size() != 5)
    fail("the pickle sets an array's state with " + std::to_string(s.items.size()) +
         " values, not 4 or 5");
  const size_t o = s.items.size() - 4;
  const std::vector<uint32_t> items = s.items;
  std::vector<int64_t> shape = shape_of(arena, items[o]);
  arena.expect(items[o + 1], Node::Kind::DType, "an array's state");
  const bool fortran = arena.expect(items[o + 2], Node::Kind::Bool, "an array's order").boolean;
  const Node& data = arena.node(items[o + 3]);
  if (data.kind == Node::Kind::List) {
    const std::vector<uint32_t> objects = data.items;
    fill_array(arena, target, items[o + 1], std::move(shape), fortran, {}, &objects);
  } else {
    const std::string raw = arena.expect(items[o + 3], Node::Kind::Bytes, "an array's data").text;
    fill_array(arena, target, items[o + 1], std::move(shape), fortran, raw, nullptr);
  }
}

}  // namespace tarmac::pickle_detail
