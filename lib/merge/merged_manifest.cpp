// The merged manifest (merge_internal.h): one run's, written into the staging directory: its
// lists the parts' joined, each entry once; its counts those the lists imply; the shard list.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/version.h"
#include "format/json_object.h"
#include "format/manifest.h"
#include "format/names.h"
#include "merge/merge_internal.h"
#include "write/file_util.h"
#include "write/manifest_file.h"
#include "write/staging.h"

namespace tarmac::merge_detail {
namespace fs = std::filesystem;
using namespace format;

namespace {

// The entries of a part's manifest list (`inputs`, `skipped`, `ignored`, `duplicates`) joined
// into the merge's, each once: parts of one input split by samples (--shard I/N) each read
// every input, so each lists the same input, ignored member or unreadable archive; one run
// lists it once. `seen` holds the entries' texts.
void append_once(json& to, const json& from, std::set<std::string>& seen) {
  for (const auto& e : from)
    if (seen.insert(e.dump()).second) to.push_back(e);
}
void append_once(std::vector<format::ProvenanceEntry>& to,
                 const std::vector<format::ProvenanceEntry>& from, std::set<std::string>& seen) {
  for (const auto& e : from)
    if (seen.insert(format::to_json(e).dump()).second) to.push_back(e);
}

}  // namespace

// Writes the merged manifest (and shard list) into the staging directory: one run's. Its lists
// are the parts' joined, each entry once; its counts are those the lists imply
// (counts_from_lists), as a run's add up to its lists.
void write_merged_manifest(const MergeOptions& o, const PartSet& set, const PlacedShards& placed,
                           const std::map<std::string, std::string>& meta, const fs::path& staging,
                           MergeResult& result) {
  const Part& first = *set.sampled[0];
  format::Manifest manifest;
  manifest.tool_version = kVersion;
  manifest.command_line = o.command_line;
  manifest.options = first.manifest.options;
  manifest.output_options = first.manifest.output_options;
  manifest.merged_from = json::array();
  manifest.shards = placed.manifest;
  std::set<std::string> seen_inputs, seen_skipped, seen_ignored, seen_duplicates;
  for (const auto& p : set.all) {
    const format::Manifest& m = p->manifest;
    manifest.merged_from->push_back({{"path", p->path},
                                     {"samples", p->a.size()},
                                     {"shards", p->a.shards().size()},
                                     {"labels_crc32", m.labels_crc32.value_or("")},
                                     {"part", m.part ? format::part_json(*m.part) : json(nullptr)},
                                     {"inputs", m.inputs}});
    append_once(manifest.inputs, m.inputs, seen_inputs);
    append_once(manifest.skipped, m.skipped, seen_skipped);
    append_once(manifest.ignored, m.ignored, seen_ignored);
    append_once(manifest.duplicates, m.duplicates, seen_duplicates);
  }
  // The table's provenance, when every part read the same table (each reads it whole).
  const std::optional<json>& table = first.manifest.table;
  bool same_table = table.has_value();
  for (const auto& p : set.all) same_table = same_table && p->manifest.table == table;
  if (same_table) manifest.table = table;
  if (table && !same_table)
    result.warnings.push_back(
        "the parts were converted from different --table files: the merged "
        "manifest records none (each part's is in its own manifest)");
  const fs::path labels = staging / kLabelsFile;
  manifest.counts = format::counts_from_lists(manifest, result.samples, result.image_bytes);
  manifest.annotation = format::ManifestAnnotation{kLabelsFile, result.annotation_bytes};
  manifest.labels_crc32 = crc32_hex(file_crc32(labels.string()));
  manifest.schema = format::parse_ordered(meta.at(kMetaSchema));
  manifest.columns.emplace();  // the parts' columns are not merged
  if (!placed.names.empty()) {
    format::ShardList list;
    for (size_t k = 0; k < placed.names.size(); ++k)
      list.shards.push_back(
          {placed.names[k], placed.samples[k], fs::file_size(staging / placed.names[k])});
    manifest.shard_list = {kShardListFile, write_shard_list(staging, list)};
  }
  write_file_atomic((staging / kManifestFile).string(), format::sealed_manifest_text(manifest));
}

}  // namespace tarmac::merge_detail
