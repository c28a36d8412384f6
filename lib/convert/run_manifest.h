#pragma once
// The manifest of a finished conversion (docs/format.md 5): provenance, inputs with their
// checksums, counts, shards, and every sample or member left out or ignored with its code and
// reason.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "convert/convert.h"
#include "convert/dataset_writer.h"
#include "convert/table_plan.h"
#include "format/manifest.h"
#include "source/input_reader.h"

namespace tarmac {

/// What the manifest records of the run's options (made by plan_run, stage_specs.h).
struct ManifestSpec {
  std::vector<std::string> command_line;
  std::string options_json;  ///< the resolved options, as the CLI sees them ("" : none)
  nlohmann::ordered_json output_options;  ///< output_options(): what merge compares
  PartOptions part;
  size_t run_inputs = 0;  ///< every input of the run (not only this part's)
};

/// What a finished run knows, for its manifest.
struct ManifestRecord {
  const ManifestSpec& spec;
  PartSplit split;
  const std::vector<InputInfo>& inputs;     ///< as read, with sizes, checksums, errors
  std::optional<uint64_t> resumed_entries;  ///< went on from a checkpoint of this many
  const ConvertResult& result;              ///< counts filled in
  const DatasetWriter& writer;              ///< finished
  const std::filesystem::path& staging;     ///< where the shards are
  const std::filesystem::path& labels;      ///< the annotation file written
  const TablePlan* table = nullptr;         ///< convert --table: the table's plan
  /// --dedup-against: the references as verified (run_fingerprint's "dedup_against").
  const nlohmann::ordered_json* dedup_against = nullptr;
};

/// The manifest of the run (write it with format::sealed_manifest_text), its counts those of
/// `r.result`; `skipped`, `ignored` and `duplicates` are the run's lists of entries (JSON
/// objects, format.md 5), which those counts count.
format::Manifest run_manifest(const ManifestRecord& r, std::vector<format::ProvenanceEntry> skipped,
                              std::vector<format::ProvenanceEntry> ignored,
                              std::vector<format::ProvenanceEntry> duplicates);

}  // namespace tarmac
