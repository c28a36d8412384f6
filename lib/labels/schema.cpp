#include "labels/schema.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tarmac {

std::string kind_name(FieldValue::Kind k) {
  switch (k) {
    case FieldValue::Kind::Numeric:
      return "numeric";
    case FieldValue::Kind::String:
      return "string";
    case FieldValue::Kind::JsonText:
      return "json";
  }
  return "?";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
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

void Schema::observe(const std::vector<SampleField>& fields) {
  if (samples_ == 0) {
    std::vector<FieldSchema> first;
    for (const auto& f : fields) {
      FieldSchema s;
      s.name = f.name;
      s.source = f.source;
      s.kind = f.value.kind;
      s.dtype = f.value.kind == FieldValue::Kind::Numeric ? f.value.dtype : DType::U8;
      s.dtype_known = f.value.kind != FieldValue::Kind::Numeric || f.value.num_elements() > 0;
      s.shape = f.value.shape;
      s.ragged = f.value.kind != FieldValue::Kind::Numeric || declared_ragged_.count(f.name) > 0;
      if (s.ragged && s.shape.empty())
        throw SampleError("field '" + f.name + "' (member '" + f.member +
                          "') is a scalar and cannot be --ragged");
      if (s.ragged) s.total_first_axis = static_cast<uint64_t>(s.shape[0]);
      first.push_back(std::move(s));
    }
    fields_ = std::move(first);
    ++samples_;
    return;
  }
  // Validate everything first, then commit, so that a rejected sample changes nothing.
  std::map<std::string, const SampleField*> by_name;
  for (const auto& f : fields) by_name[f.name] = &f;
  for (const auto& s : fields_)
    if (!by_name.count(s.name))
      throw SampleError("field '" + s.name + "' is missing (earlier samples have it, from ." +
                        s.source + ")");
  std::vector<FieldSchema> next = fields_;
  for (const auto& f : fields) {
    auto it = std::find_if(next.begin(), next.end(),
                           [&](const FieldSchema& s) { return s.name == f.name; });
    if (it == next.end())
      throw SampleError("field '" + f.name + "' from member '" + f.member +
                        "' is not in earlier samples");
    FieldSchema& s = *it;
    const FieldValue& v = f.value;
    const std::string where = "member '" + f.member + "', field '" + f.name + "': ";
    if (v.kind != s.kind)
      throw SampleError(where + "is " + kind_name(v.kind) + " here but " + kind_name(s.kind) +
                        " in earlier samples");
    if (v.kind == FieldValue::Kind::Numeric) {
      if (v.num_elements() > 0) {
        s.dtype = s.dtype_known ? promote(s.dtype, v.dtype) : v.dtype;
        s.dtype_known = true;
      }
      if (v.shape.size() != s.shape.size())
        throw SampleError(where + "shape " + shape_string(v.shape) + " here but " +
                          shape_string(s.shape) +
                          " in earlier samples (a different number of "
                          "dimensions)");
      const bool inner_same = std::equal(v.shape.begin() + (v.shape.empty() ? 0 : 1), v.shape.end(),
                                         s.shape.begin() + (s.shape.empty() ? 0 : 1));
      if (!inner_same)
        throw SampleError(where + "shape " + shape_string(v.shape) + " here but " +
                          shape_string(s.shape) +
                          " in earlier samples; only the first axis may vary between samples");
      if (!s.ragged && !v.shape.empty() && v.shape[0] != s.shape[0]) {
        const bool from_json = s.source == "json" || s.source.ends_with(".json");
        if (!from_json && !declared_ragged_.count(s.name))
          throw SampleError(where + "shape " + shape_string(v.shape) + " here but " +
                            shape_string(s.shape) +
                            " in earlier samples; declare the field with --ragged " + s.name +
                            " if its first axis may vary");
        s.ragged = true;
        s.total_first_axis = static_cast<uint64_t>(s.shape[0]) * samples_;
      }
    }
    if (s.ragged) s.total_first_axis += static_cast<uint64_t>(v.shape[0]);
  }
  fields_ = std::move(next);
  ++samples_;
}

std::string Schema::to_json() const {
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const auto& s : fields_) {
    nlohmann::ordered_json f;
    f["kind"] = kind_name(s.kind);
    f["dtype"] = std::string(dtype_name(s.dtype));
    std::vector<int64_t> shape = s.shape;
    if (s.ragged && !shape.empty()) shape[0] = -1;
    f["shape"] = shape;
    f["ragged"] = s.ragged;
    f["source"] = s.source;
    fields[s.name] = f;
  }
  return fields.dump();
}

std::string Schema::checkpoint() const {
  nlohmann::ordered_json fields = nlohmann::ordered_json::array();
  for (const auto& s : fields_)
    fields.push_back({{"name", s.name},
                      {"source", s.source},
                      {"kind", static_cast<int>(s.kind)},
                      {"dtype", std::string(dtype_name(s.dtype))},
                      {"dtype_known", s.dtype_known},
                      {"shape", s.shape},
                      {"ragged", s.ragged},
                      {"total_first_axis", s.total_first_axis}});
  return nlohmann::ordered_json{{"samples", samples_}, {"fields", fields}}.dump();
}

void Schema::restore(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    std::vector<FieldSchema> fields;
    for (const auto& f : j.at("fields")) {
      FieldSchema s;
      s.name = f.at("name").get<std::string>();
      s.source = f.at("source").get<std::string>();
      const int kind = f.at("kind").get<int>();
      if (kind < 0 || kind > static_cast<int>(FieldValue::Kind::JsonText))
        throw FatalError("unknown field kind " + std::to_string(kind));
      s.kind = static_cast<FieldValue::Kind>(kind);
      const auto dtype = dtype_from_name(f.at("dtype").get<std::string>());
      if (!dtype) throw FatalError("unknown dtype");
      s.dtype = *dtype;
      s.dtype_known = f.at("dtype_known").get<bool>();
      s.shape = f.at("shape").get<std::vector<int64_t>>();
      s.ragged = f.at("ragged").get<bool>();
      s.total_first_axis = f.at("total_first_axis").get<uint64_t>();
      fields.push_back(std::move(s));
    }
    samples_ = j.at("samples").get<uint64_t>();
    fields_ = std::move(fields);
  } catch (const nlohmann::json::exception& e) {
    throw FatalError(std::string("corrupt schema checkpoint: ") + e.what());
  }
}

}  // namespace tarmac
