#include "convert/run_manifest.h"

#include "common/version.h"
#include "format/field_spec.h"
#include "format/json_object.h"
#include "format/names.h"
#include "remote/url.h"
#include "write/manifest_file.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

format::Manifest run_manifest(const ManifestRecord& r, std::vector<format::ProvenanceEntry> skipped,
                              std::vector<format::ProvenanceEntry> ignored,
                              std::vector<format::ProvenanceEntry> duplicates) {
  const ManifestSpec& o = r.spec;
  const ConvertResult& res = r.result;
  format::Manifest m;
  m.tool_version = kVersion;
  m.command_line = o.command_line;
  m.options = o.options_json.empty() ? json::object() : format::parse_ordered(o.options_json);
  m.output_options = o.output_options;  // what merge compares between parts
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
    m.inputs.push_back(std::move(j));
  }
  if (r.table) m.table = r.table->manifest_entry();
  if (r.dedup_against) m.dedup_against = *r.dedup_against;
  if (r.resumed_entries)
    m.resumed = format::ManifestResumed{*r.resumed_entries, res.resumed_samples};
  if (r.split != PartSplit::None)
    m.part =
        format::ManifestPart{o.part.index, o.part.count,
                             r.split == PartSplit::Inputs ? "inputs" : "samples", o.run_inputs};
  m.shards.emplace();
  for (size_t i = 0; i < r.writer.shard_names().size(); ++i) {
    const std::string& s = r.writer.shard_names()[i];
    m.shards->push_back({s, r.writer.shard_sizes()[i], crc32_hex(r.writer.shard_crcs()[i])});
  }
  format::ManifestCounts counts;
  counts.samples = res.samples;
  counts.skipped_samples = res.skipped_samples;
  counts.skipped_members = res.error_members;
  counts.ignored_members = res.ignored_members;
  counts.duplicates = res.duplicates;
  counts.no_instance_samples = res.no_instance_samples;
  counts.duplicate_content_samples = res.duplicate_content_samples;
  counts.unused_images = res.unused_images;
  counts.input_errors = res.input_errors.size();
  counts.shards = res.shards;
  counts.image_bytes = res.image_bytes;
  m.counts = counts;
  m.annotation = format::ManifestAnnotation{format::kLabelsFile, res.annotation_bytes};
  m.labels_crc32 = crc32_hex(file_crc32(r.labels.string()));
  m.schema = schema_json(r.writer.schema().specs());
  m.skipped = std::move(skipped);
  m.ignored = std::move(ignored);
  m.duplicates = std::move(duplicates);
  m.columns.emplace();  // `tarmac column merge` adds to it
  return m;
}

}  // namespace tarmac
