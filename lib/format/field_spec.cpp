#include "format/field_spec.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "format/json_keys.h"
#include "format/json_object.h"
#include "format/names.h"

namespace tarmac {

std::string_view kind_name(FieldKind k) {
  switch (k) {
    case FieldKind::Numeric:
      return "numeric";
    case FieldKind::String:
      return "string";
    case FieldKind::Json:
      return "json";
  }
  return "?";
}

std::optional<FieldKind> kind_from_name(std::string_view name) {
  for (FieldKind k : {FieldKind::Numeric, FieldKind::String, FieldKind::Json})
    if (kind_name(k) == name) return k;
  return std::nullopt;
}

uint64_t FieldSpec::sample_bytes() const {
  if (ragged) return 0;
  uint64_t b = dtype_size(dtype);
  for (int64_t d : shape) b *= static_cast<uint64_t>(d);
  return b;
}

std::vector<int64_t> FieldSpec::inner_shape() const {
  return shape.empty() ? std::vector<int64_t>{}
                       : std::vector<int64_t>(shape.begin() + 1, shape.end());
}

nlohmann::ordered_json schema_json(std::span<const FieldSpec> fields) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const FieldSpec& f : fields) {
    nlohmann::ordered_json e = {{"kind", std::string(kind_name(f.kind))},
                                {"dtype", std::string(dtype_name(f.dtype))},
                                {"shape", f.shape},
                                {"ragged", f.ragged},
                                {"source", f.source}};
    if (f.nullable) e["nullable"] = true;  // absent: false (files before nullable fields)
    if (f.geometry) e["geometry"] = geometry_json(*f.geometry);
    format::append_new_key(j, f.name, std::move(e));
  }
  return j;
}

std::string schema_to_json(std::span<const FieldSpec> fields) {
  return schema_json(fields).dump();
}

std::vector<FieldSpec> schema_from_json(std::string_view text) {
  // The fields' order is the document's. Parsed into a map (ordered_json finds each key by a
  // linear search: 30 000 fields took seconds), the order taken by one scan of the keys.
  constexpr int kMaxSchemaDepth = 64;  // a valid one nests 3 deep: object, entry, shape
  const format::JsonKeys keys = format::scan_json_keys(text, kMaxSchemaDepth);
  if (!keys.valid || keys.too_deep) throw ParseError("the schema is not a JSON object");
  if (!keys.duplicate.empty())
    throw ParseError(keys.duplicate_at_top ? "the schema names field '" + keys.duplicate + "' twice"
                                           : "a schema entry names '" + keys.duplicate + "' twice");
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) throw ParseError("the schema is not a JSON object");
  const std::vector<std::string>& order = keys.top_keys;
  std::vector<FieldSpec> out;
  out.reserve(order.size());
  for (const std::string& name : order) {
    const nlohmann::json& e = j.at(name);
    auto bad = [&](const std::string& why) {
      return ParseError("schema entry of field '" + name + "' " + why);
    };
    FieldSpec f;
    f.name = name;
    if (!e.is_object()) throw bad("is not a JSON object");
    auto get = [&](const char* key) -> const nlohmann::json& {
      if (!e.contains(key)) throw bad(std::string("has no '") + key + "'");
      return e[key];
    };
    const auto& kind = get("kind");
    const auto k = kind.is_string() ? kind_from_name(kind.get<std::string>()) : std::nullopt;
    if (!k) throw bad("has unknown kind " + kind.dump());
    f.kind = *k;
    const auto& dtype = get("dtype");
    const auto dt = dtype.is_string() ? dtype_from_name(dtype.get<std::string>()) : std::nullopt;
    if (!dt) throw bad("has unknown dtype " + dtype.dump());
    f.dtype = *dt;
    const auto& ragged = get("ragged");
    if (!ragged.is_boolean()) throw bad("has a 'ragged' that is not true or false");
    f.ragged = ragged.get<bool>();
    const auto& shape = get("shape");
    if (!shape.is_array() || shape.size() + 1 > format::kMaxDims)
      throw bad("has a shape that is not an array of at most " +
                std::to_string(format::kMaxDims - 1) + " dimensions");
    for (const auto& d : shape) {
      if (!d.is_number_integer()) throw bad("has a non-integer dimension");
      f.shape.push_back(d.get<int64_t>());
    }
    // The source is informative: third-party writers may leave it out.
    if (e.contains("source")) {
      if (!e["source"].is_string()) throw bad("has a 'source' that is not a string");
      f.source = e["source"].get<std::string>();
    }
    if (e.contains("nullable")) {
      if (!e["nullable"].is_boolean()) throw bad("has a 'nullable' that is not true or false");
      f.nullable = e["nullable"].get<bool>();
    }
    if (e.contains("geometry")) {
      try {
        f.geometry = geometry_from_json(e["geometry"]);
      } catch (const ParseError& g) {
        throw bad(std::string("has a 'geometry' that ") + g.what());
      }
    }
    if (f.kind != FieldKind::Numeric && (f.dtype != DType::U8 || !f.ragged))
      throw bad("is of kind " + std::string(kind_name(f.kind)) + " but not ragged U8");
    if (f.ragged && (f.shape.empty() || f.shape[0] != -1))
      throw bad("is ragged but its shape " + shape_text(f.shape) + " does not start with -1");
    for (size_t d = f.ragged ? 1 : 0; d < f.shape.size(); ++d)
      if (f.shape[d] < 0) throw bad("has a negative dimension in " + shape_text(f.shape));
    out.push_back(std::move(f));
  }
  return out;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::BOOL) return b;
  if (b == DType::BOOL) return a;
  const bool fa = dtype_is_float(a), fb = dtype_is_float(b);
  if (fa && fb) {
    if (dtype_size(a) != dtype_size(b)) return dtype_size(a) > dtype_size(b) ? a : b;
    return DType::F32;  // F16 with BF16
  }
  if (fa || fb) {
    const DType f = fa ? a : b, i = fa ? b : a;
    if (dtype_size(i) <= 2 && dtype_size(f) >= 4) return f;
    return DType::F64;
  }
  const bool sa = dtype_is_signed_int(a), sb = dtype_is_signed_int(b);
  if (sa == sb) return dtype_size(a) >= dtype_size(b) ? a : b;
  const DType s = sa ? a : b, u = sa ? b : a;
  if (dtype_size(s) > dtype_size(u)) return s;
  switch (dtype_size(u)) {
    case 1:
      return DType::I16;
    case 2:
      return DType::I32;
    case 4:
      return DType::I64;
    default:
      return DType::F64;
  }
}

bool ragged_by_source(std::string_view source) {
  return source == "json" || source.ends_with(".json");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace tarmac
