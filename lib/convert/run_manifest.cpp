#include "convert/run_manifest.h"

#include "common/version.h"
#include "convert/checkpoint.h"
#include "format/field_spec.h"
#include "format/manifest.h"
#include "format/names.h"
#include "remote/url.h"
#include "write/manifest_file.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

json run_manifest(const ManifestRecord& r, json skipped, json ignored, json duplicates) {
  const ConvertOptions& o = r.options;
  const ConvertResult& res = r.result;
  json manifest;
  manifest["tool"] = {{"name", "tarmac"}, {"version", kVersion}};
  manifest["command_line"] = o.command_line;
  manifest["options"] = o.options_json.empty() ? json::object() : json::parse(o.options_json);
  manifest["output_options"] = output_options(o);  // what merge compares between parts
  json inputs = json::array();
  for (const auto& in : r.inputs) {
    json j = {{"path", in.path},
              {"size", in.bytes_read},
              {"crc32", crc32_hex(in.crc32)},
              {"members", in.members}};
    if (remote::is_remote(in.path)) {  // what the network cost: retries, bytes resumed by range
      j["retries"] = in.retries;
      j["resumed_bytes"] = in.resumed_bytes;
    }
    if (!in.error.empty()) j["error"] = in.error;
    inputs.push_back(j);
  }
  manifest["inputs"] = inputs;
  if (r.table) manifest["table"] = r.table->manifest_entry();
  if (r.resumed_entries)
    manifest["resumed"] = {{"entries", *r.resumed_entries}, {"samples", res.resumed_samples}};
  if (r.split != PartSplit::None)
    manifest["part"] = {{"index", o.part_index},
                        {"count", o.part_count},
                        {"split", r.split == PartSplit::Inputs ? "inputs" : "samples"},
                        {"all_inputs", o.inputs.size()}};
  json shards = json::array();
  for (size_t i = 0; i < r.writer.shard_names().size(); ++i) {
    const std::string& s = r.writer.shard_names()[i];
    shards.push_back({{"name", s},
                      {"size", fs::file_size(r.staging / s)},
                      {"crc32", crc32_hex(r.writer.shard_crcs()[i])}});
  }
  format::ManifestCounts counts;
  counts.samples = res.samples;
  counts.skipped_samples = res.skipped_samples;
  counts.skipped_members = res.error_members;
  counts.ignored_members = res.ignored_members;
  counts.duplicates = res.duplicates;
  counts.no_instance_samples = res.no_instance_samples;
  counts.unused_images = res.unused_images;
  counts.input_errors = res.input_errors.size();
  counts.shards = res.shards;
  counts.image_bytes = res.image_bytes;
  manifest["counts"] = format::counts_json(counts);
  manifest["shards"] = shards;
  manifest["annotation"] = {{"name", format::kLabelsFile}, {"size", res.annotation_bytes}};
  manifest["labels_crc32"] = crc32_hex(file_crc32(r.labels.string()));
  manifest["schema"] = schema_json(r.writer.schema().specs());
  manifest["skipped"] = std::move(skipped);
  manifest["ignored"] = std::move(ignored);
  manifest["duplicates"] = std::move(duplicates);
  manifest[format::kManifestColumns] = json::object();  // `tarmac column merge` adds to it
  return manifest;
}

}  // namespace tarmac
