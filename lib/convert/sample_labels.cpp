#include "convert/sample_labels.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "common/bytes.h"
#include "common/error.h"
#include "format/names.h"
#include "labels/json_labels.h"
#include "labels/npy.h"
#include "labels/npz.h"
#include "labels/text_labels.h"
#include "source/class_scan.h"
#include "source/packed_member.h"

namespace tarmac {
namespace {

// "meta.json" -> "meta."; "json" -> "".
std::string prefix_of(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  return dot == std::string::npos ? "" : ext.substr(0, dot + 1);
}

}  // namespace

std::string last_extension(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  return dot == std::string::npos ? ext : ext.substr(dot + 1);
}

std::string extension_stem(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  return dot == std::string::npos ? ext : ext.substr(0, dot);
}

bool is_label_extension(const std::string& last) {
  return last == "json" || last == "npy" || last == "npz" || last == "txt" || last == "cls";
}

ErrorCode label_error_code(const std::string& ext) {
  const std::string last = last_extension(ext);
  if (last == "json") return ErrorCode::BadJson;
  if (last == "npy") return ErrorCode::BadNpy;
  if (last == "npz") return ErrorCode::BadNpz;
  return ErrorCode::BadText;
}

void parse_label_member(const Member& m, const std::string& ext, uint64_t max_label_size,
                        std::vector<SampleField>& out) {
  const std::string last = last_extension(ext);
  const std::span<const uint8_t> bytes(m.data);
  auto add = [&](std::string name, FieldValue v) {
    for (const auto& f : out)
      if (f.name == name)
        throw SampleError("field '" + name + "' comes from both member '" + f.member +
                              "' and member '" + m.name + "'",
                          ErrorCode::BadField);
    out.push_back({std::move(name), m.name, ext, std::move(v)});
  };
  if (last == "json") {
    for (auto& [name, v] : parse_json_labels(bytes, prefix_of(ext), extension_stem(ext)))
      add(name, std::move(v));
  } else if (last == "npz") {
    // Its arrays together, once inflated, are held to the limit of a label.
    for (auto& [name, v] : parse_npz(bytes, prefix_of(ext), max_label_size, "--max-label-size"))
      add(name, std::move(v));
  } else if (last == "npy") {
    add(extension_stem(ext), parse_npy(bytes));
  } else if (last == "txt") {
    add(extension_stem(ext), parse_txt(bytes));
  } else if (last == "cls") {
    add(extension_stem(ext), parse_cls(bytes));
  }
}

bool is_label_member(const Member& m, const MemberRoles& roles) {
  std::string key, ext;
  split_member_name(m.name, key, ext, roles.key_rule);
  if (std::find(roles.dense.begin(), roles.dense.end(), ext) != roles.dense.end()) return false;
  if (!roles.no_images && is_image_extension(ext, roles.image_exts)) return false;
  return is_label_extension(last_extension(ext));
}

void check_label_sizes(const RawSample& raw, const MemberRoles& roles, uint64_t max_label_size) {
  for (const Member& m : raw.members) {
    const uint64_t size = is_packed(m) ? m.size : m.data.size();
    if (size <= max_label_size || !is_label_member(m, roles)) continue;
    throw SampleError("member '" + m.name + "': the label member is " + format_bytes(size) +
                          ", over --max-label-size " + format_bytes(max_label_size) +
                          " (a label is parsed whole in memory); raise --max-label-size to "
                          "read it",
                      ErrorCode::MemberTooLarge);
  }
}

void check_required(const std::vector<SampleField>& fields, const LabelRecipe& labels) {
  for (const auto& name : labels.require_fields) {
    const auto it = std::find_if(fields.begin(), fields.end(),
                                 [&](const SampleField& f) { return f.name == name; });
    if (it == fields.end() || it->value.null)
      throw SampleError("required field '" + name + "' is " +
                            (it == fields.end() ? "missing" : "null") + " (--require " + name + ")",
                        ErrorCode::BadField);
  }
}

void add_class(const Member& image, const std::vector<std::string>& classes,
               std::vector<SampleField>& fields) {
  const std::string folder = parent_folder(image.name);
  if (folder.empty())
    throw SampleError("image member '" + image.name +
                          "' is in no folder, so it has no class (--classes-from-dirs takes the "
                          "class from the folder holding the image, as in ROOT/CLASS/IMAGE)",
                      ErrorCode::BadSample);
  const auto it = std::find(classes.begin(), classes.end(), folder);
  if (it == classes.end())
    throw SampleError("image member '" + image.name + "' is in folder '" + folder +
                          "', which is not among the run's classes (did the inputs change "
                          "during the run?)",
                      ErrorCode::BadSample);
  for (const auto& f : fields)
    if (f.name == format::kClassField)
      throw SampleError("field '" + f.name + "' comes from both member '" + f.member +
                            "' and the image's folder (--classes-from-dirs)",
                        ErrorCode::BadField);
  FieldValue v;
  v.kind = FieldValue::Kind::Numeric;
  v.dtype = DType::I64;
  const int64_t id = it - classes.begin();
  v.data.resize(sizeof id);
  std::memcpy(v.data.data(), &id, sizeof id);  // little-endian, as every tarmac target
  fields.push_back({format::kClassField, image.name, "dir", std::move(v)});
}

void select_fields(std::vector<SampleField>& fields, const LabelRecipe& labels) {
  if (labels.keep_fields.empty() && labels.drop_fields.empty()) return;
  auto listed = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  std::erase_if(fields, [&](const SampleField& f) {
    // Provenance and geometry, not labels: always kept.
    if (f.name == format::kRowField || f.name == format::kOriginalSizeField ||
        f.name == format::kCropTopLeftField || f.name == format::kTargetSizeField)
      return false;
    return (!labels.keep_fields.empty() && !listed(labels.keep_fields, f.name)) ||
           listed(labels.drop_fields, f.name);
  });
}

}  // namespace tarmac
