#include "format/manifest.h"

#include <utility>

#include "common/error.h"
#include "format/names.h"

namespace tarmac::format {
namespace {

using json = nlohmann::ordered_json;

// Every entry with its member: the one list the writer and the reader both walk.
template <typename Counts, typename F>
void for_each_count(Counts& c, F&& f) {
  f("samples", c.samples);
  f("skipped_samples", c.skipped_samples);
  f("skipped_members", c.skipped_members);
  f("ignored_members", c.ignored_members);
  f("duplicates", c.duplicates);
  f("no_instance_samples", c.no_instance_samples);
  f("unused_images", c.unused_images);
  f("input_errors", c.input_errors);
  f("shards", c.shards);
  f("image_bytes", c.image_bytes);
}

}  // namespace

json counts_json(const ManifestCounts& c) {
  json j = json::object();
  for_each_count(c, [&](const char* name, uint64_t v) { j[name] = v; });
  return j;
}

ManifestCounts counts_of(const json& manifest) {
  ManifestCounts c;
  if (!manifest.is_object() || !manifest.contains("counts") || !manifest["counts"].is_object())
    return c;
  const json& j = manifest["counts"];
  for_each_count(c, [&](const char* name, uint64_t& v) {
    if (j.contains(name) && j[name].is_number_unsigned()) v = j[name].get<uint64_t>();
  });
  return c;
}

std::vector<std::string> manifest_shard_names(const json& manifest) {
  std::vector<std::string> names;
  if (!manifest.is_object() || !manifest.contains("shards")) return names;
  const json& shards = manifest["shards"];
  if (!shards.is_array()) throw ParseError("manifest: \"shards\" is not a list");
  for (const auto& s : shards) {
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string())
      throw ParseError("manifest: a \"shards\" entry has no \"name\"");
    std::string name = s["name"].get<std::string>();
    if (!is_shard_name(name))
      throw ParseError("manifest: lists '" + name + "' as a shard, which is no shard's name");
    names.push_back(std::move(name));
  }
  return names;
}

json column_record_json(const ManifestColumn& c) {
  return {{"size", c.size},
          {"values_crc32", c.values_crc32},
          {"offsets_crc32", c.offsets_crc32},
          {"shapes_crc32", c.shapes_crc32}};
}

std::optional<std::map<std::string, ManifestColumn>> manifest_columns(const json& manifest) {
  if (!manifest.is_object() || !manifest.contains(kManifestColumns)) return std::nullopt;
  const json& cols = manifest[kManifestColumns];
  if (!cols.is_object()) throw ParseError("manifest: \"columns\" is not an object");
  std::map<std::string, ManifestColumn> out;
  for (auto it = cols.begin(); it != cols.end(); ++it) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const std::string& name = it.key();
    const json& r = it.value();
    const auto text = [&](const char* key) {
      if (!r.is_object() || !r.contains(key) || !r[key].is_string())
        throw ParseError("manifest: column '" + name + "' has no \"" + key + "\"");
      return r[key].get<std::string>();
    };
    ManifestColumn c;
    if (!r.is_object() || !r.contains("size") || !r["size"].is_number_unsigned())
      throw ParseError("manifest: column '" + name + "' has no \"size\"");
    c.size = r["size"].get<uint64_t>();
    c.values_crc32 = text("values_crc32");
    c.offsets_crc32 = text("offsets_crc32");
    c.shapes_crc32 = text("shapes_crc32");
    out.emplace(name, std::move(c));
  }
  return out;
}

DeclaredGeometry declared_geometry(const nlohmann::ordered_json& manifest) {
  DeclaredGeometry out;
  if (!manifest.is_object() || !manifest.contains("output_options")) return out;
  const auto& oo = manifest["output_options"];
  if (!oo.is_object()) return out;
  auto strings = [&](const char* flag, std::vector<std::string>& to) {
    if (oo.contains(flag) && oo[flag].is_array())
      for (const auto& s : oo[flag])
        if (s.is_string()) to.push_back(s.get<std::string>());
  };
  strings("--points", out.points);
  strings("--boxes", out.boxes);
  return out;
}

}  // namespace tarmac::format
