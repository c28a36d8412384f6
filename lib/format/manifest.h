#pragma once
// manifest.json (docs/format.md 5): its counts, typed and named once, and the shards it lists,
// for the writers (convert, merge) and the readers (verify, --overwrite, a dead run's
// clean-up). Sealing and checking its CRC-32 are in write/manifest_file.h and check/verify.cpp.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tarmac::format {

/// The manifest's "counts" (format.md 5), every entry a run writes.
struct ManifestCounts {
  uint64_t samples = 0;
  uint64_t skipped_samples = 0;
  uint64_t skipped_members = 0;
  uint64_t ignored_members = 0;
  uint64_t duplicates = 0;
  uint64_t no_instance_samples = 0;
  uint64_t unused_images = 0;
  uint64_t input_errors = 0;
  uint64_t shards = 0;
  uint64_t image_bytes = 0;
};

/// The "counts" object, its entries in the order format.md lists them.
nlohmann::ordered_json counts_json(const ManifestCounts& c);

/// The "counts" of `manifest`; an entry that is absent or not an unsigned number is 0 (a
/// manifest written before the entry existed).
ManifestCounts counts_of(const nlohmann::ordered_json& manifest);

/// The names of the shards `manifest` lists ("shards": [{"name": ...}, ...]). Throws
/// ParseError when the list is malformed or names anything but a plain shard name
/// (names.h is_shard_name), which no tarmac run writes: a path there must never be acted on.
std::vector<std::string> manifest_shard_names(const nlohmann::ordered_json& manifest);

/// The manifest's record of the dataset's merged derived columns: "columns": {NAME: record}.
/// Convert and merge write it empty, `tarmac column merge` adds a column, `column rm` removes
/// it, so that verify notices a column file deleted, replaced or copied in.
inline constexpr const char* kManifestColumns = "columns";

/// One merged column as the manifest records it: its file's size and its tensors' CRC-32s
/// (8 hex digits, as its own metadata says them: format.md 9).
struct ManifestColumn {
  uint64_t size = 0;
  std::string values_crc32, offsets_crc32, shapes_crc32;
  bool operator==(const ManifestColumn&) const = default;
};

nlohmann::ordered_json column_record_json(const ManifestColumn& c);

/// The columns `manifest` records; nullopt when it has no "columns" entry (written before
/// columns were recorded). Throws ParseError naming a malformed record.
std::optional<std::map<std::string, ManifestColumn>> manifest_columns(
    const nlohmann::ordered_json& manifest);

/// The label fields `convert --points` and `--boxes` transformed with the image, as the
/// manifest's "output_options" records them (boxes as "NAME:xywh" or "NAME:xyxy").
struct DeclaredGeometry {
  std::vector<std::string> points, boxes;
};

/// The fields `manifest` declares as points and boxes; none where it records none (a manifest
/// written by another tool, or malformed there).
DeclaredGeometry declared_geometry(const nlohmann::ordered_json& manifest);

}  // namespace tarmac::format
