#include "labels/json_labels.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"

namespace tarmac {

static_assert(std::endian::native == std::endian::little,
              "values are stored by memcpy on a little-endian host");

namespace {

// ordered_json keeps members in document order, which is the field order.
using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;

// Runs before nlohmann (and before our own recursion over the tree) ever sees the document,
// so hostile depth is refused in one flat pass.
void check_depth(std::span<const uint8_t> bytes) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (uint8_t b : bytes) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (b == '\\')
        escaped = true;
      else if (b == '"')
        in_string = false;
      continue;
    }
    if (b == '"') {
      in_string = true;
    } else if (b == '[' || b == '{') {
      if (++depth > kMaxDepth) throw ParseError("the JSON is nested deeper than 64 levels");
    } else if ((b == ']' || b == '}') && depth > 0) {
      --depth;
    }
  }
}

template <typename T>
void append_scalar(std::vector<uint8_t>& data, T value) {
  const size_t at = data.size();
  data.resize(at + sizeof value);
  std::memcpy(data.data() + at, &value, sizeof value);
}

FieldValue text_field(FieldValue::Kind kind, const std::string& text) {
  FieldValue v;
  v.kind = kind;
  v.dtype = DType::U8;
  v.shape = {static_cast<int64_t>(text.size())};
  v.data.assign(text.begin(), text.end());
  return v;
}

bool fits_i64(const Json& leaf) {
  return !leaf.is_number_unsigned() || leaf.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
}

// Collects the leaves of a rectangular array in C order; false if some node breaks the shape
// or a leaf is not a number or bool.
bool collect_leaves(const Json& node, size_t dim, const std::vector<int64_t>& shape,
                    std::vector<const Json*>& leaves) {
  if (dim == shape.size()) {
    if (!node.is_number() && !node.is_boolean()) return false;
    leaves.push_back(&node);
    return true;
  }
  if (!node.is_array() || static_cast<int64_t>(node.size()) != shape[dim]) return false;
  for (const Json& child : node)
    if (!collect_leaves(child, dim + 1, shape, leaves)) return false;
  return true;
}

std::optional<FieldValue> numeric_tensor(const Json& array) {
  std::vector<int64_t> shape;
  for (const Json* p = &array; p->is_array(); p = &p->front()) {
    shape.push_back(static_cast<int64_t>(p->size()));
    if (p->empty()) break;
  }
  std::vector<const Json*> leaves;
  if (!collect_leaves(array, 0, shape, leaves)) return std::nullopt;

  bool all_bool = true, any_float = false;
  for (const Json* leaf : leaves) {
    if (!leaf->is_boolean()) all_bool = false;
    if (leaf->is_number_float() || (leaf->is_number() && !fits_i64(*leaf))) any_float = true;
  }
  FieldValue v;
  v.kind = FieldValue::Kind::Numeric;
  v.shape = std::move(shape);
  if (leaves.empty() || any_float) {
    v.dtype = DType::F64;
    v.data.reserve(leaves.size() * 8);
    for (const Json* leaf : leaves)
      append_scalar(v.data,
                    leaf->is_boolean() ? (leaf->get<bool>() ? 1.0 : 0.0) : leaf->get<double>());
  } else if (all_bool) {
    v.dtype = DType::BOOL;
    for (const Json* leaf : leaves) v.data.push_back(leaf->get<bool>() ? 1 : 0);
  } else {
    v.dtype = DType::I64;
    v.data.reserve(leaves.size() * 8);
    for (const Json* leaf : leaves)
      append_scalar(v.data, leaf->is_boolean() ? int64_t{leaf->get<bool>()} : leaf->get<int64_t>());
  }
  return v;
}

FieldValue convert(const Json& value) {
  FieldValue v;
  v.kind = FieldValue::Kind::Numeric;
  switch (value.type()) {
    case Json::value_t::boolean:
      v.dtype = DType::BOOL;
      v.data.push_back(value.get<bool>() ? 1 : 0);
      return v;
    case Json::value_t::number_integer:
      v.dtype = DType::I64;
      append_scalar(v.data, value.get<int64_t>());
      return v;
    case Json::value_t::number_unsigned:
      if (fits_i64(value)) {
        v.dtype = DType::I64;
        append_scalar(v.data, value.get<int64_t>());
      } else {
        v.dtype = DType::F64;
        append_scalar(v.data, value.get<double>());
      }
      return v;
    case Json::value_t::number_float:
      v.dtype = DType::F64;
      append_scalar(v.data, value.get<double>());
      return v;
    case Json::value_t::string:
      return text_field(FieldValue::Kind::String, value.get_ref<const std::string&>());
    case Json::value_t::array:
      if (auto tensor = numeric_tensor(value)) return std::move(*tensor);
      return text_field(FieldValue::Kind::Json, value.dump());
    case Json::value_t::null:  // no value: the field is named but missing here (nullable)
      v.kind = FieldValue::Kind::Json;
      v.dtype = DType::U8;
      v.null = true;
      return v;
    default:  // an empty object
      return text_field(FieldValue::Kind::Json, value.dump());
  }
}

class Flattener {
 public:
  explicit Flattener(Fields& out) : out_(out) {}

  void add(const std::string& name, const Json& value) {
    if (value.is_object() && !value.empty()) {
      add_members(name + ".", value);
      return;
    }
    if (!names_.insert(name).second)
      throw ParseError("the JSON has two values for the field '" + name +
                       "' once nested objects are flattened");
    out_.emplace_back(name, convert(value));
  }

  void add_members(const std::string& prefix, const Json& object) {
    for (const auto& [key, child] : object.items()) {
      if (key.empty())
        throw ParseError("the JSON object under '" + prefix +
                         "' has an empty key, which cannot name a field");
      add(prefix + key, child);
    }
  }

 private:
  Fields& out_;
  std::unordered_set<std::string> names_;
};

std::string nlohmann_reason(const std::exception& e) {
  std::string what = e.what();
  const size_t cut = what.find("] ");  // drop the "[json.exception.parse_error.101] " tag
  return cut == std::string::npos ? what : what.substr(cut + 2);
}

}  // namespace

Fields parse_json_labels(std::span<const uint8_t> bytes, std::string_view prefix,
                         std::string_view top_level_name) {
  if (!is_valid_utf8(bytes)) throw ParseError("the JSON is not valid UTF-8");
  check_depth(bytes);

  // Duplicate keys within one object would silently keep the last value; refuse them while parsing.
  std::vector<std::unordered_set<std::string>> open_objects;
  const Json::parser_callback_t on_event = [&](int, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      open_objects.pop_back();
    } else if (event == E::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        throw ParseError("the JSON object has the key '" + key + "' twice");
    } else if (event == E::value && parsed.is_number_float() &&
               !std::isfinite(parsed.get<double>())) {
      throw ParseError("the JSON holds a number too large for a double");
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(bytes.begin(), bytes.end(), on_event, true, false);
  } catch (const nlohmann::json::exception& e) {
    throw ParseError("the JSON is malformed: " + nlohmann_reason(e));
  }

  Fields out;
  Flattener flat(out);
  if (doc.is_object())
    flat.add_members(std::string(prefix), doc);
  else
    flat.add(std::string(top_level_name), doc);
  return out;
}

}  // namespace tarmac
