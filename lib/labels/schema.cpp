#include "labels/schema.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "format/json_object.h"

namespace tarmac {

namespace {

using Kind = FieldValue::Kind;

// A field's first value.
FieldSchema first_schema(const SampleField& f, const std::set<std::string>& declared_ragged) {
  FieldSchema s;
  s.name = f.name;
  s.source = f.source;
  s.kind = f.value.kind;
  s.dtype = f.value.kind == Kind::Numeric ? f.value.dtype : DType::U8;
  s.dtype_known = f.value.kind != Kind::Numeric || f.value.num_elements() > 0;
  s.shape = f.value.shape;
  s.ragged = f.value.kind != Kind::Numeric || declared_ragged.count(f.name) > 0;
  if (s.ragged && s.shape.empty())
    throw SampleError(
        "field '" + f.name + "' (member '" + f.member + "') is a scalar and cannot be --ragged",
        ErrorCode::BadField);
  return s;
}

// Only empty arrays so far: nothing typed the field yet.
bool untyped(const FieldSchema& s) {
  return s.kind == Kind::Numeric && !s.dtype_known && !s.shape.empty();
}

// The field's values go on as JSON text; every value is rendered as JSON text at the end. Also
// when the field was JSON text already: the value that calls this is not (an empty array, a
// number or a string after arrays of strings), and its record holds its own bytes, not its text.
void to_json_text(FieldSchema& s, bool mixed) {
  s.rerender = true;
  s.kind = Kind::Json;
  s.dtype = DType::U8;
  s.dtype_known = true;
  s.shape = {0};
  s.ragged = true;
  s.mixed = s.mixed || mixed;
}

// A field first named without a value: untyped JSON until a value types it.
FieldSchema null_schema(const SampleField& f, uint64_t missing) {
  FieldSchema s;
  s.name = f.name;
  s.source = f.source;
  s.kind = Kind::Json;
  s.dtype = DType::U8;
  s.shape = {0};
  s.ragged = true;
  s.typed = false;
  s.missing = missing;
  return s;
}

// A field typed by its first value `f`, after `missing` samples without it.
FieldSchema typed_schema(const SampleField& f, const std::set<std::string>& declared_ragged,
                         uint64_t missing) {
  FieldSchema s = first_schema(f, declared_ragged);
  s.missing = missing;
  s.present = 1;
  s.kind_counts[static_cast<int>(f.value.kind)] = 1;
  if (s.ragged) s.total_first_axis = static_cast<uint64_t>(s.shape[0]);
  return s;
}

std::string where(const SampleField& f) {
  return "member '" + f.member + "', field '" + f.name + "': ";
}

// A numeric value `f` of the numeric field `s`: checks its shape against the field's, widens
// the dtype and makes the field ragged where its first axis varies. False when the field
// became JSON text instead (a JSON field whose rows do not agree).
bool merge_numeric(FieldSchema& s, const SampleField& f, bool json_source,
                   const std::set<std::string>& declared_ragged) {
  const FieldValue& v = f.value;
  const bool empty_value = v.num_elements() == 0 && !v.shape.empty();
  const bool same_ndim = v.shape.size() == s.shape.size();
  const bool inner_same =
      same_ndim && std::equal(v.shape.begin() + (v.shape.empty() ? 0 : 1), v.shape.end(),
                              s.shape.begin() + (s.shape.empty() ? 0 : 1));
  if (!inner_same) {
    if (json_source && untyped(s) && !empty_value && !v.shape.empty()) {
      // Only empty arrays before: this value fixes the shape (they stay empty rows).
      s.shape = v.shape;
      s.shape[0] = 0;
    } else if (json_source && v.shape == std::vector<int64_t>{0} && !s.shape.empty()) {
      // [] in a typed field of rows: an empty row (a ragged list of no boxes or points;
      // before #38 it made the field JSON text when it came after a non-empty one).
      if (!s.ragged) {
        s.ragged = true;
        s.total_first_axis = static_cast<uint64_t>(s.shape[0]) * s.present;
      }
    } else if (json_source) {
      to_json_text(s, /*mixed=*/true);
      return false;
    } else if (!same_ndim) {
      throw SampleError(where(f) + "shape " + shape_text(v.shape) + " here but " +
                            shape_text(s.shape) +
                            " in earlier samples (a different number of dimensions)",
                        ErrorCode::SchemaMismatch);
    } else {
      throw SampleError(where(f) + "shape " + shape_text(v.shape) + " here but " +
                            shape_text(s.shape) +
                            " in earlier samples; only the first axis may vary between samples",
                        ErrorCode::SchemaMismatch);
    }
  }
  if (v.num_elements() > 0) {
    s.dtype = s.dtype_known ? promote(s.dtype, v.dtype) : v.dtype;
    s.dtype_known = true;
  }
  if (!s.ragged && !v.shape.empty() && v.shape[0] != s.shape[0]) {
    if (!ragged_by_source(s.source) && !declared_ragged.count(s.name))
      throw SampleError(where(f) + "shape " + shape_text(v.shape) + " here but " +
                            shape_text(s.shape) +
                            " in earlier samples; declare the field with --ragged " + s.name +
                            " if its first axis may vary",
                        ErrorCode::SchemaMismatch);
    s.ragged = true;
    s.total_first_axis = static_cast<uint64_t>(s.shape[0]) * s.present;
  }
  return true;
}

// One more value `f` of the typed field `s`: counts it, and changes the field's kind (to JSON
// text), shape, dtype or raggedness as the value needs, or throws where it cannot.
void merge_value(FieldSchema& s, const SampleField& f,
                 const std::set<std::string>& declared_ragged) {
  const FieldValue& v = f.value;
  ++s.kind_counts[static_cast<int>(v.kind)];
  if (s.kind == Kind::Json && s.rerender) {  // already JSON text: anything goes
    ++s.present;
    return;
  }
  if (untyped(s) && v.kind != Kind::Numeric) {
    // "tags": [] until now, then ["a", "b"]: the empty arrays were JSON too.
    to_json_text(s, /*mixed=*/v.kind != Kind::Json);
    ++s.present;
    return;
  }
  const bool json_source = ragged_by_source(s.source) && ragged_by_source(f.source);
  if (v.kind != s.kind) {
    if (!json_source)
      throw SampleError(where(f) + "is " + std::string(kind_name(v.kind)) + " here but " +
                            std::string(kind_name(s.kind)) + " in earlier samples",
                        ErrorCode::SchemaMismatch);
    // An empty array types nothing: after arrays of strings it is one more (no warning).
    const bool empty_array = v.kind == Kind::Numeric && v.shape == std::vector<int64_t>{0};
    to_json_text(s, /*mixed=*/!(empty_array && s.kind == Kind::Json));
    ++s.present;
    return;
  }
  if (v.kind == Kind::Numeric && !merge_numeric(s, f, json_source, declared_ragged)) {
    ++s.present;
    return;
  }
  if (s.ragged) s.total_first_axis += v.shape.empty() ? 1 : static_cast<uint64_t>(v.shape[0]);
  ++s.present;
}

}  // namespace

void Schema::observe(const std::vector<SampleField>& fields) {
  // Fields are changed in place, each found through index_; a rejected sample is undone: the
  // fields it added are dropped and those it changed get their earlier state back.
  const size_t before = fields_.size();
  constexpr uint8_t kSeen = 1, kSaved = 2;
  std::vector<uint8_t> state(before, 0);  // kSeen: has a value here; kSaved: in `undo`
  std::vector<std::pair<size_t, FieldSchema>> undo;
  auto add = [&](FieldSchema s, bool seen) {
    index_.emplace(s.name, fields_.size());
    fields_.push_back(std::move(s));
    state.push_back(seen ? kSeen : 0);
  };
  try {
    for (const auto& f : fields) {
      const auto found = index_.find(f.name);
      if (f.value.null) {  // named, without a value: missing here
        if (found == index_.end()) add(null_schema(f, samples_), false);
        continue;
      }
      if (found == index_.end()) {  // new: absent from every sample before this one
        add(typed_schema(f, declared_ragged_, samples_), true);
        continue;
      }
      const size_t i = found->second;
      if (i < before && !(state[i] & kSaved)) {
        undo.emplace_back(i, fields_[i]);
        state[i] |= kSaved;
      }
      state[i] |= kSeen;
      FieldSchema& s = fields_[i];
      if (!s.typed)  // the first value after nulls types the field
        s = typed_schema(f, declared_ragged_, s.missing);
      else
        merge_value(s, f, declared_ragged_);
    }
  } catch (...) {
    for (size_t i = before; i < fields_.size(); ++i) index_.erase(fields_[i].name);
    fields_.erase(fields_.begin() + static_cast<std::ptrdiff_t>(before), fields_.end());
    for (auto& [i, saved] : undo) fields_[i] = std::move(saved);
    throw;
  }
  for (size_t i = 0; i < fields_.size(); ++i)
    if (!(state[i] & kSeen)) ++fields_[i].missing;
  ++samples_;
}

std::vector<FieldSpec> Schema::specs() const {
  std::vector<FieldSpec> out;
  for (const auto& s : fields_) {
    FieldSpec f{s.name, s.kind, s.dtype, s.shape, s.ragged, s.source, s.nullable()};
    if (f.ragged && !f.shape.empty()) f.shape[0] = -1;
    for (const auto& [name, g] : geometry_) {
      if (name != f.name) continue;
      f.geometry = g;
      if (g.kind == GeometryKind::Camera)
        f.geometry->layout = f.shape == std::vector<int64_t>{4} ? "fxfycxcy" : "K";
      int64_t elements = 1;
      for (int64_t d : f.shape) elements *= d;
      if (g.kind == GeometryKind::AxisAngle && g.joints == 0) {
        int64_t joints = f.ragged ? 1 : elements / 3;  // at least every pair's joints
        for (const auto& [a, b] : g.pairs) joints = std::max<int64_t>(joints, std::max(a, b) + 1);
        f.geometry->joints = joints;
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

nlohmann::ordered_json Schema::checkpoint() const {
  nlohmann::ordered_json fields = nlohmann::ordered_json::array();
  for (const auto& s : fields_)
    fields.push_back({{"name", s.name},
                      {"source", s.source},
                      {"kind", std::string(kind_name(s.kind))},
                      {"dtype", std::string(dtype_name(s.dtype))},
                      {"dtype_known", s.dtype_known},
                      {"shape", s.shape},
                      {"ragged", s.ragged},
                      {"total_first_axis", s.total_first_axis},
                      {"present", s.present},
                      {"missing", s.missing},
                      {"kind_counts", s.kind_counts},
                      {"rerender", s.rerender},
                      {"mixed", s.mixed},
                      {"typed", s.typed}});
  return nlohmann::ordered_json{{"samples", samples_}, {"fields", fields}};
}

void Schema::restore(const nlohmann::ordered_json& j) {
  // Integers through integer_of: nlohmann's get<> casts a float out of range as it is (undefined).
  const auto count = [](const nlohmann::ordered_json& v) {
    const auto n = format::integer_of<uint64_t>(v);
    if (!n) throw FatalError("corrupt schema checkpoint: a count is not a non-negative integer");
    return *n;
  };
  const auto counts_of = [&](const nlohmann::ordered_json& v) {
    if (!v.is_array()) throw FatalError("corrupt schema checkpoint: a list is not a list");
    std::vector<uint64_t> out;
    for (const auto& e : v) out.push_back(count(e));
    return out;
  };
  try {
    std::vector<FieldSchema> fields;
    for (const auto& f : j.at("fields")) {
      FieldSchema s;
      s.name = f.at("name").get<std::string>();
      s.source = f.at("source").get<std::string>();
      const auto& kind = f.at("kind");
      if (kind.is_string()) {  // by name ("numeric", "string", "json")
        const auto k = kind_from_name(kind.get<std::string>());
        if (!k) throw FatalError("unknown field kind '" + kind.get<std::string>() + "'");
        s.kind = *k;
      } else {  // a checkpoint of version 1: the enum's number
        const int number = format::integer_of<int>(kind).value_or(-1);
        if (number < 0 || number > static_cast<int>(FieldValue::Kind::Json))
          throw FatalError("unknown field kind " + std::to_string(number));
        s.kind = static_cast<FieldValue::Kind>(number);
      }
      const auto dtype = dtype_from_name(f.at("dtype").get<std::string>());
      if (!dtype) throw FatalError("unknown dtype");
      s.dtype = *dtype;
      s.dtype_known = f.at("dtype_known").get<bool>();
      s.shape.clear();
      if (!f.at("shape").is_array()) throw FatalError("corrupt schema checkpoint: shape");
      for (const auto& d : f.at("shape")) {
        const auto n = format::integer_of<int64_t>(d);
        if (!n) throw FatalError("corrupt schema checkpoint: a shape holds a non-integer");
        s.shape.push_back(*n);
      }
      s.ragged = f.at("ragged").get<bool>();
      s.total_first_axis = count(f.at("total_first_axis"));
      s.present = count(f.at("present"));
      s.missing = count(f.at("missing"));
      const auto counts = counts_of(f.at("kind_counts"));
      if (counts.size() != 3) throw FatalError("kind_counts is not three counts");
      for (size_t k = 0; k < 3; ++k) s.kind_counts[k] = counts[k];
      s.rerender = f.at("rerender").get<bool>();
      s.mixed = f.at("mixed").get<bool>();
      s.typed = f.at("typed").get<bool>();
      fields.push_back(std::move(s));
    }
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < fields.size(); ++i)
      if (!index.emplace(fields[i].name, i).second)
        throw FatalError("corrupt schema checkpoint: the field '" + fields[i].name +
                         "' is listed twice");
    samples_ = count(j.at("samples"));
    fields_ = std::move(fields);
    index_ = std::move(index);
  } catch (const nlohmann::json::exception& e) {
    throw FatalError(std::string("corrupt schema checkpoint: ") + e.what());
  }
}

}  // namespace tarmac
