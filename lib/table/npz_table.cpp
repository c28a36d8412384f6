// mmhuman3d HumanData tables: an .npz written by np.savez_compressed whose N-long arrays are
// the rows, with two pickled 0-d object arrays (smplx, meta) holding dicts of more of them.
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "labels/npy.h"
#include "labels/npz.h"
#include "labels/pickle.h"
#include "table/table_formats.h"

namespace tarmac {
namespace {

// Arrays that are not N long still go into the metadata when at most this many elements
// (keypoints2d_mask and keypoints3d_mask are 190): small enough for the header, and a trainer
// needs them to read the keypoints.
constexpr uint64_t kMaxMetadataElements = 4096;

// One array of the table, from a member or from inside a pickled dict: numbers, strings, or
// Python objects (elements of an object array, items of a list).
struct Leaf {
  enum class Kind { Numeric, Strings, Objects };
  std::string name;
  Kind kind = Kind::Numeric;
  std::vector<int64_t> shape;
  DType dtype = DType::F64;
  std::vector<uint8_t> data;         // Numeric: C order, little-endian
  std::vector<std::string> strings;  // Strings: C order
  std::vector<PickleValue> objects;  // Objects: C order
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

uint64_t count_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

double half_to_double(uint16_t h) {
  const int exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? std::nan("") : sign * INFINITY;
  return sign * std::ldexp(mant + 1024, exp - 25);
}

nlohmann::ordered_json element_json(DType t, const uint8_t* p) {
  auto get = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t) {
    case DType::BOOL:
      return *p != 0;
    case DType::U8:
      return get(uint8_t{});
    case DType::I8:
      return get(int8_t{});
    case DType::U16:
      return get(uint16_t{});
    case DType::I16:
      return get(int16_t{});
    case DType::U32:
      return get(uint32_t{});
    case DType::I32:
      return get(int32_t{});
    case DType::U64:
      return get(uint64_t{});
    case DType::I64:
      return get(int64_t{});
    case DType::F16:
      return half_to_double(get(uint16_t{}));
    case DType::BF16:
      return static_cast<double>(std::bit_cast<float>(uint32_t{get(uint16_t{})} << 16));
    case DType::F32:
      return get(float{});
    case DType::F64:
      return get(double{});
  }
  return nullptr;
}

nlohmann::ordered_json to_json(const PickleValue& v);

// Elements [begin, begin + shape's count) of a leaf-like flat sequence as nested JSON lists.
template <typename Element>
nlohmann::ordered_json nested(const std::vector<int64_t>& shape, size_t dim, uint64_t& next,
                              const Element& element) {
  if (dim == shape.size()) return element(next++);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) list.push_back(nested(shape, dim + 1, next, element));
  return list;
}

DType dtype_of_descr(const std::string& d) {
  const std::string code = d.substr(1);
  if (code == "b1") return DType::BOOL;
  if (code == "u1") return DType::U8;
  if (code == "i1") return DType::I8;
  if (code == "u2") return DType::U16;
  if (code == "i2") return DType::I16;
  if (code == "u4") return DType::U32;
  if (code == "i4") return DType::I32;
  if (code == "u8") return DType::U64;
  if (code == "i8") return DType::I64;
  if (code == "f2") return DType::F16;
  if (code == "f4") return DType::F32;
  return DType::F64;  // "f8": the unpickler accepts no other numeric dtype
}

// Nested JSON lists of an empty array still cost one list per index before its first zero
// dimension; (2**60, 0) would never end. Arrays with elements are bounded by their data.
void check_empty_shape(const std::vector<int64_t>& shape) {
  uint64_t lists = 1;
  for (int64_t d : shape) {
    if (d == 0) return;
    if (__builtin_mul_overflow(lists, static_cast<uint64_t>(d), &lists) || lists > (1u << 24))
      break;
  }
  if (count_of(shape) == 0 && lists > (1u << 16))
    throw ParseError("an empty array of shape " + shape_text(shape) + " is too large to read");
}

// A pickled array as a leaf.
Leaf leaf_of_array(const std::string& name, const PickleValue& a) {
  check_empty_shape(a.shape);
  Leaf l;
  l.name = name;
  l.shape = a.shape;
  const char kind = a.text.size() > 1 ? a.text[1] : 'O';
  if (kind == 'O') {
    l.kind = Leaf::Kind::Objects;
    l.objects = a.items;
  } else if (kind == 'U' || kind == 'S') {
    l.kind = Leaf::Kind::Strings;
    for (uint64_t i = 0; i < a.num_elements(); ++i) l.strings.push_back(pickle_array_string(a, i));
  } else {
    l.dtype = dtype_of_descr(a.text);
    l.data = a.data;
  }
  return l;
}

nlohmann::ordered_json to_json(const PickleValue& v) {
  using T = PickleValue::Type;
  switch (v.type) {
    case T::None:
      return nullptr;
    case T::Bool:
      return v.boolean;
    case T::Int:
      return v.integer;
    case T::Float:
      return v.real;
    case T::Str:
      return v.text;
    case T::Bytes:
      throw ParseError("a bytes value has no JSON form");
    case T::List:
    case T::Tuple: {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const PickleValue& item : v.items) list.push_back(to_json(item));
      return list;
    }
    case T::Dict: {
      nlohmann::ordered_json obj = nlohmann::ordered_json::object();
      for (size_t k = 0; k < v.keys.size(); ++k) {
        if (v.keys[k].type != T::Str) throw ParseError("a dict with a key that is not a str");
        obj[v.keys[k].text] = to_json(v.items[k]);
      }
      return obj;
    }
    case T::Array: {
      const Leaf l = leaf_of_array("", v);
      uint64_t next = 0;
      if (l.kind == Leaf::Kind::Objects)
        return nested(l.shape, 0, next, [&](uint64_t i) { return to_json(l.objects[i]); });
      if (l.kind == Leaf::Kind::Strings)
        return nested(l.shape, 0, next,
                      [&](uint64_t i) { return nlohmann::ordered_json(l.strings[i]); });
      const size_t size = dtype_size(l.dtype);
      return nested(l.shape, 0, next,
                    [&](uint64_t i) { return element_json(l.dtype, l.data.data() + i * size); });
    }
  }
  return nullptr;
}

nlohmann::ordered_json leaf_json(const Leaf& l) {
  uint64_t next = 0;
  if (l.kind == Leaf::Kind::Strings)
    return nested(l.shape, 0, next,
                  [&](uint64_t i) { return nlohmann::ordered_json(l.strings[i]); });
  if (l.kind == Leaf::Kind::Objects)
    return nested(l.shape, 0, next, [&](uint64_t i) { return to_json(l.objects[i]); });
  const size_t size = dtype_size(l.dtype);
  return nested(l.shape, 0, next,
                [&](uint64_t i) { return element_json(l.dtype, l.data.data() + i * size); });
}

class NpzTableReader {
 public:
  NpzTableReader(const std::string& path, const TableOptions& o) : path_(path), o_(o) {}

  Table read(std::span<const uint8_t> bytes) {
    try {
      return read_all(bytes);
    } catch (const ParseError& e) {
      fail(e.what());
    }
  }

 private:
  Table read_all(std::span<const uint8_t> bytes) {
    std::vector<NpzMember> members;
    try {
      members = read_npz_members(bytes, o_.max_bytes);
    } catch (const ParseError& e) {
      throw FatalError("the table '" + path_ + "': " + e.what());
    }
    for (const auto& [name, data] : members) {
      member_ = name;
      try {
        read_member(name, data);
      } catch (const ParseError& e) {
        fail(e.what());
      }
    }
    member_.clear();

    const std::string image = o_.image_column.empty() ? "image_path" : o_.image_column;
    const Leaf* image_leaf = nullptr;
    for (const Leaf& l : leaves_)
      if (l.name == image) image_leaf = &l;
    if (!image_leaf) {
      std::string names;
      for (const Leaf& l : leaves_) names += (names.empty() ? "" : ", ") + l.name;
      fail("there is no image column '" + image +
           "'; name it with --table-image (the arrays are: " + names + ")");
    }
    if (image_leaf->kind != Leaf::Kind::Strings || image_leaf->shape.size() != 1)
      fail("the image column '" + image + "' is not a 1-d array of strings (it has shape " +
           shape_text(image_leaf->shape) + ")");

    Table t;
    t.path = path_;
    t.format = TableFormat::Npz;
    t.bytes = bytes.size();
    t.crc32 = crc32_of(bytes);
    t.metadata = std::move(metadata_);
    uint64_t rows = static_cast<uint64_t>(image_leaf->shape[0]);
    if (t.metadata.contains("__data_len__")) {
      const auto& n = t.metadata["__data_len__"];
      if (!n.is_number_integer() || n.get<int64_t>() < 0) fail("'__data_len__' is not a row count");
      rows = n.get<uint64_t>();
      if (rows != static_cast<uint64_t>(image_leaf->shape[0]))
        fail("'__data_len__' says " + std::to_string(rows) + " rows, but the image column '" +
             image + "' has " + std::to_string(image_leaf->shape[0]));
    }
    t.rows = rows;
    t.member_columns.push_back(image);
    t.member_paths.push_back(image_leaf->strings);

    for (const Leaf& l : leaves_) {
      if (&l == image_leaf) continue;
      member_ = l.name;
      if (static_cast<uint64_t>(l.shape[0]) != rows) {
        const bool kept = count_of(l.shape) <= kMaxMetadataElements;
        t.ignored.push_back(
            {"'" + l.name + "': shape " + shape_text(l.shape) +
                 ", not N = " + std::to_string(rows) + " rows long" +
                 (kept ? " (kept in the annotation file's table metadata)"
                       : " (left out: over " + std::to_string(kMaxMetadataElements) +
                             " elements for the metadata)"),
             !kept});
        if (kept) t.metadata[l.name] = leaf_json(l);
        continue;
      }
      t.columns.push_back(column_of(l, rows));
    }
    member_.clear();
    return t;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw FatalError("the table '" + path_ + "'" +
                     (member_.empty() ? std::string() : ", member '" + member_ + "'") + ": " +
                     what);
  }

  void read_member(const std::string& name, const std::vector<uint8_t>& data) {
    const NpyHeader h = parse_npy_header(data);
    if (h.descr == "|O") {
      const PickleValue v = unpickle(std::span(data).subspan(h.data_offset));
      if (v.type != PickleValue::Type::Array || v.text != "|O" || v.shape != h.shape)
        throw ParseError(std::string("the pickle holds a ") + pickle_type_name(v.type) +
                         ", not the object array of shape " + shape_text(h.shape) +
                         " its header declares");
      if (h.shape.empty()) {
        add_value(name, v.items.at(0));
      } else {
        add_leaf(leaf_of_array(name, v));
      }
      return;
    }
    FieldValue f = parse_npy(data);
    Leaf l;
    l.name = name;
    l.shape = h.shape;
    if (f.kind == FieldValue::Kind::Numeric) {
      l.dtype = f.dtype;
      l.data = std::move(f.data);
    } else {
      l.kind = Leaf::Kind::Strings;
      const std::string text(f.data.begin(), f.data.end());
      if (f.kind == FieldValue::Kind::String) {
        l.strings.push_back(text);
      } else {
        // parse_npy gives larger string arrays as nested JSON lists; flatten them in C order.
        const nlohmann::json j = nlohmann::json::parse(text);
        flatten_strings(j, l.strings);
      }
    }
    add_leaf(std::move(l));
  }

  static void flatten_strings(const nlohmann::json& j, std::vector<std::string>& out) {
    if (j.is_string()) {
      out.push_back(j.get<std::string>());
      return;
    }
    for (const auto& item : j) flatten_strings(item, out);
  }

  void claim(const std::string& name) {
    if (!names_.insert(name).second)
      throw ParseError("the name '" + name + "' is given twice (a member and a key of a dict)");
  }

  // A 0-d leaf is a single value: metadata.
  void add_leaf(Leaf l) {
    claim(l.name);
    check_empty_shape(l.shape);
    if (l.shape.empty()) {
      metadata_[l.name] = leaf_json(l);
      return;
    }
    leaves_.push_back(std::move(l));
  }

  // A value inside a pickled member: dicts flatten with dots, arrays and lists become leaves,
  // scalars metadata.
  void add_value(const std::string& name, const PickleValue& v) {
    using T = PickleValue::Type;
    switch (v.type) {
      case T::Dict:
        for (size_t k = 0; k < v.keys.size(); ++k) {
          if (v.keys[k].type != T::Str)
            throw ParseError("'" + name + "' is a dict with a " + pickle_type_name(v.keys[k].type) +
                             " key; only str keys are read");
          add_value(name + "." + v.keys[k].text, v.items[k]);
        }
        return;
      case T::Array:
        add_leaf(leaf_of_array(name, v));
        return;
      case T::List:
      case T::Tuple: {
        Leaf l;
        l.name = name;
        l.kind = Leaf::Kind::Objects;
        l.shape = {static_cast<int64_t>(v.items.size())};
        l.objects = v.items;
        add_leaf(std::move(l));
        return;
      }
      case T::Bytes:
        throw ParseError("'" + name + "' is a bytes value, which a table cannot hold");
      default:
        claim(name);
        metadata_[name] = to_json(v);
    }
  }

  // A per-row column from an N-long leaf.
  TableColumn column_of(const Leaf& l, uint64_t rows) const {
    TableColumn c;
    c.name = l.name;
    const std::vector<int64_t> row_shape(l.shape.begin() + 1, l.shape.end());
    const uint64_t per_row = count_of(row_shape);
    if (l.kind == Leaf::Kind::Numeric) {
      c.uniform = true;
      c.dtype = l.dtype;
      c.row_shape = row_shape;
      c.data = l.data;
      return c;
    }
    if (l.kind == Leaf::Kind::Strings) {
      for (uint64_t r = 0; r < rows; ++r) {
        if (row_shape.empty()) {
          c.values.push_back(string_value(l.strings[r]));
          continue;
        }
        Leaf row;
        row.kind = Leaf::Kind::Strings;
        row.shape = row_shape;
        row.strings.assign(l.strings.begin() + static_cast<ptrdiff_t>(r * per_row),
                           l.strings.begin() + static_cast<ptrdiff_t>((r + 1) * per_row));
        c.values.push_back(json_value(leaf_json(row)));
      }
      return c;
    }
    // Python objects: one kind of scalar throughout becomes a uniform or string column, the
    // rest a JSON value per row (null for None).
    if (row_shape.empty()) {
      using T = PickleValue::Type;
      bool all_str = true, all_bool = true, all_int = true, all_number = true;
      for (const PickleValue& v : l.objects) {
        all_str = all_str && v.type == T::Str;
        all_bool = all_bool && v.type == T::Bool;
        all_int = all_int && v.type == T::Int;
        all_number = all_number && (v.type == T::Int || v.type == T::Float);
      }
      if (all_str) {
        for (const PickleValue& v : l.objects) c.values.push_back(string_value(v.text));
        return c;
      }
      if (all_bool || all_int || all_number) {
        c.uniform = true;
        c.dtype = all_bool ? DType::BOOL : all_int ? DType::I64 : DType::F64;
        const size_t size = dtype_size(c.dtype);
        c.data.resize(l.objects.size() * size);
        for (size_t r = 0; r < l.objects.size(); ++r) {
          const PickleValue& v = l.objects[r];
          uint8_t* p = c.data.data() + r * size;
          if (all_bool)
            *p = v.boolean ? 1 : 0;
          else if (all_int)
            std::memcpy(p, &v.integer, 8);
          else {
            const double d = v.type == T::Int ? static_cast<double>(v.integer) : v.real;
            std::memcpy(p, &d, 8);
          }
        }
        return c;
      }
    }
    for (uint64_t r = 0; r < rows; ++r) {
      Leaf row;
      row.kind = Leaf::Kind::Objects;
      row.shape = row_shape;
      row.objects.assign(l.objects.begin() + static_cast<ptrdiff_t>(r * per_row),
                         l.objects.begin() + static_cast<ptrdiff_t>((r + 1) * per_row));
      nlohmann::ordered_json j = leaf_json(row);
      if (j.is_null()) {
        FieldValue v;
        v.kind = FieldValue::Kind::Json;
        v.null = true;
        c.values.push_back(std::move(v));
      } else {
        c.values.push_back(json_value(j));
      }
    }
    return c;
  }

  static FieldValue string_value(const std::string& s) {
    FieldValue v;
    v.kind = FieldValue::Kind::String;
    v.dtype = DType::U8;
    v.shape = {static_cast<int64_t>(s.size())};
    v.data.assign(s.begin(), s.end());
    return v;
  }

  static FieldValue json_value(const nlohmann::ordered_json& j) {
    const std::string text = j.dump();
    FieldValue v;
    v.kind = FieldValue::Kind::Json;
    v.dtype = DType::U8;
    v.shape = {static_cast<int64_t>(text.size())};
    v.data.assign(text.begin(), text.end());
    return v;
  }

  std::string path_;
  const TableOptions& o_;
  std::string member_;
  std::vector<Leaf> leaves_;
  std::set<std::string> names_;
  nlohmann::ordered_json metadata_ = nlohmann::ordered_json::object();
};

}  // namespace

Table load_npz_table(const std::string& path, std::span<const uint8_t> bytes,
                     const TableOptions& o) {
  return NpzTableReader(path, o).read(bytes);
}

}  // namespace tarmac
