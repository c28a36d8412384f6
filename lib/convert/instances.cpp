#include "convert/instances.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>

#include "common/error.h"
#include "format/names.h"
#include "labels/json_labels.h"

namespace tarmac {
namespace {

FieldValue int64_value(int64_t v) {
  FieldValue r;
  r.dtype = DType::I64;
  r.data.resize(sizeof v);
  std::memcpy(r.data.data(), &v, sizeof v);  // little-endian, as every tarmac target
  return r;
}

// Entry k of a value along its first axis: numeric slices keep their dtype; the entries of a
// JSON array are parsed as JSON labels would be (an object flattens to `name.sub` fields).
void slice_into(const SampleField& f, int64_t k, std::vector<SampleField>& out) {
  const FieldValue& v = f.value;
  if (v.kind == FieldValue::Kind::Numeric) {
    SampleField s{f.name, f.member, f.source, {}};
    s.value.dtype = v.dtype;
    s.value.shape.assign(v.shape.begin() + 1, v.shape.end());
    const size_t row = static_cast<size_t>(s.value.num_elements()) * dtype_size(v.dtype);
    const auto* p = v.data.data() + static_cast<size_t>(k) * row;
    s.value.data.assign(p, p + row);
    out.push_back(std::move(s));
    return;
  }
  const auto arr = nlohmann::json::parse(v.data.begin(), v.data.end());
  const std::string text = arr.at(static_cast<size_t>(k)).dump();
  const auto* b = reinterpret_cast<const uint8_t*>(text.data());
  for (auto& [name, value] :
       parse_json_labels(std::span<const uint8_t>(b, text.size()), f.name + ".", f.name))
    out.push_back({std::move(name), f.member, f.source, std::move(value)});
}

// The number of entries along the first axis of an --instances field (null: none).
int64_t instance_count(const SampleField& f, const std::string& role) {
  const FieldValue& v = f.value;
  if (v.null) return 0;
  if (v.kind == FieldValue::Kind::Numeric && !v.shape.empty()) return v.shape.front();
  if (v.kind == FieldValue::Kind::Json) {
    const auto j = nlohmann::json::parse(v.data.begin(), v.data.end(), nullptr, false);
    if (j.is_array()) return static_cast<int64_t>(j.size());
  }
  throw SampleError(role + " field '" + f.name + "' (member '" + f.member + "') has shape " +
                        shape_text(v.shape) +
                        ": it needs a first axis, one entry per instance (an array)",
                    ErrorCode::BadField);
}

const SampleField* named_field(const std::vector<SampleField>& fields, const std::string& name) {
  const SampleField* found = nullptr;
  for (const auto& f : fields)
    if (f.name == name) found = &f;
  return found;
}

}  // namespace

void check_output_count(uint64_t count, const std::string& subject, const char* noun,
                        const SampleLimits& limits) {
  if (count <= limits.max_outputs_per_sample) return;
  throw SampleError(subject + " " + std::to_string(count) + " " + noun +
                    ", more than --max-outputs-per-sample " +
                    std::to_string(limits.max_outputs_per_sample) +
                    " (the outputs of one sample are held in memory together); raise "
                    "--max-outputs-per-sample to convert it");
}

std::vector<std::vector<SampleField>> split_instances(const std::vector<SampleField>& fields,
                                                      const LabelRecipe& labels,
                                                      const SampleLimits& limits) {
  const auto named = [&](const std::string& n) {
    return n == labels.instances ||
           std::find(labels.instance_fields.begin(), labels.instance_fields.end(), n) !=
               labels.instance_fields.end();
  };
  const SampleField* main = named_field(fields, labels.instances);
  if (!main)
    throw SampleError("instances field '" + labels.instances + "' is missing (--instances " +
                          labels.instances + ")",
                      ErrorCode::BadField);
  const int64_t k_count = instance_count(*main, "instances");
  check_output_count(static_cast<uint64_t>(k_count),
                     "instances field '" + labels.instances + "' (--instances) has", "entries",
                     limits);
  for (const auto& name : labels.instance_fields) {
    const SampleField* f = named_field(fields, name);
    if (!f || f->value.null) continue;  // nothing to slice: every instance lacks it
    const int64_t n = instance_count(*f, "instance");
    if (n != k_count)
      throw SampleError("instance field '" + name + "' (member '" + f->member + "') has " +
                            std::to_string(n) + " entries but instances field '" +
                            labels.instances + "' has " + std::to_string(k_count) +
                            " (--instance-fields)",
                        ErrorCode::BadField);
  }
  std::vector<std::vector<SampleField>> sets(static_cast<size_t>(k_count));
  for (int64_t k = 0; k < k_count; ++k) {
    auto& set = sets[static_cast<size_t>(k)];
    for (const auto& f : fields) {
      if (named(f.name) && !f.value.null)
        slice_into(f, k, set);
      else if (!named(f.name))
        set.push_back(f);
    }
    set.push_back({format::kRowField, main->member, main->source, int64_value(k)});
  }
  return sets;
}

}  // namespace tarmac
