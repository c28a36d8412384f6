#include "labels/schema.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tarmac {

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
        throw SampleError(
            "field '" + f.name + "' (member '" + f.member + "') is a scalar and cannot be --ragged",
            ErrorCode::BadField);
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
      throw SampleError(
          "field '" + s.name + "' is missing (earlier samples have it, from ." + s.source + ")",
          ErrorCode::SchemaMismatch);
  std::vector<FieldSchema> next = fields_;
  for (const auto& f : fields) {
    auto it = std::find_if(next.begin(), next.end(),
                           [&](const FieldSchema& s) { return s.name == f.name; });
    if (it == next.end())
      throw SampleError(
          "field '" + f.name + "' from member '" + f.member + "' is not in earlier samples",
          ErrorCode::SchemaMismatch);
    FieldSchema& s = *it;
    const FieldValue& v = f.value;
    const std::string where = "member '" + f.member + "', field '" + f.name + "': ";
    if (v.kind != s.kind)
      throw SampleError(where + "is " + std::string(kind_name(v.kind)) + " here but " +
                            std::string(kind_name(s.kind)) + " in earlier samples",
                        ErrorCode::SchemaMismatch);
    if (v.kind == FieldValue::Kind::Numeric) {
      if (v.num_elements() > 0) {
        s.dtype = s.dtype_known ? promote(s.dtype, v.dtype) : v.dtype;
        s.dtype_known = true;
      }
      if (v.shape.size() != s.shape.size())
        throw SampleError(where + "shape " + shape_text(v.shape) + " here but " +
                              shape_text(s.shape) +
                              " in earlier samples (a different number of "
                              "dimensions)",
                          ErrorCode::SchemaMismatch);
      const bool inner_same = std::equal(v.shape.begin() + (v.shape.empty() ? 0 : 1), v.shape.end(),
                                         s.shape.begin() + (s.shape.empty() ? 0 : 1));
      if (!inner_same)
        throw SampleError(where + "shape " + shape_text(v.shape) + " here but " +
                              shape_text(s.shape) +
                              " in earlier samples; only the first axis may vary between samples",
                          ErrorCode::SchemaMismatch);
      if (!s.ragged && !v.shape.empty() && v.shape[0] != s.shape[0]) {
        if (!ragged_by_source(s.source) && !declared_ragged_.count(s.name))
          throw SampleError(where + "shape " + shape_text(v.shape) + " here but " +
                                shape_text(s.shape) +
                                " in earlier samples; declare the field with --ragged " + s.name +
                                " if its first axis may vary",
                            ErrorCode::SchemaMismatch);
        s.ragged = true;
        s.total_first_axis = static_cast<uint64_t>(s.shape[0]) * samples_;
      }
    }
    if (s.ragged) s.total_first_axis += static_cast<uint64_t>(v.shape[0]);
  }
  fields_ = std::move(next);
  ++samples_;
}

std::vector<FieldSpec> Schema::specs() const {
  std::vector<FieldSpec> out;
  for (const auto& s : fields_) {
    FieldSpec f{s.name, s.kind, s.dtype, s.shape, s.ragged, s.source};
    if (f.ragged && !f.shape.empty()) f.shape[0] = -1;
    out.push_back(std::move(f));
  }
  return out;
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
      if (kind < 0 || kind > static_cast<int>(FieldValue::Kind::Json))
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
