#pragma once
// manifest.json (docs/format.md 5): one typed document, one writer and one parser, for the
// writers (convert, merge, `column merge`/`rm`) and the readers (verify, info, --overwrite, a
// dead run's clean-up). Its seal (the CRC-32 of its own text) is written and checked here too.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/provenance.h"

namespace tarmac::format {

/// The manifest's "counts" (format.md 5), every entry a run writes.
struct ManifestCounts {
  uint64_t samples = 0;
  uint64_t skipped_samples = 0;
  uint64_t skipped_members = 0;
  uint64_t ignored_members = 0;
  uint64_t duplicates = 0;
  uint64_t no_instance_samples = 0;
  uint64_t duplicate_content_samples = 0;  ///< convert --dedup
  uint64_t unused_images = 0;
  uint64_t input_errors = 0;
  uint64_t shards = 0;
  uint64_t image_bytes = 0;
  bool operator==(const ManifestCounts&) const = default;
};

/// The "counts" object, its entries in the order format.md lists them.
nlohmann::ordered_json counts_json(const ManifestCounts& c);

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

/// A shard as "shards" lists it.
struct ManifestShard {
  std::string name;  ///< a plain shard name (names.h is_shard_name), never a path
  uint64_t size = 0;
  std::string crc32;  ///< 8 hex digits; empty when the entry has none
  bool operator==(const ManifestShard&) const = default;
};

/// "resumed": a run that went on from a checkpoint.
struct ManifestResumed {
  uint64_t entries = 0, samples = 0;
  bool operator==(const ManifestResumed&) const = default;
};

/// "part": a run of `convert --shard I/N`.
struct ManifestPart {
  uint64_t index = 0, count = 0;
  std::string split;  ///< "inputs" or "samples"
  uint64_t all_inputs = 0;
  bool operator==(const ManifestPart&) const = default;
};

/// "part" as JSON (also each of merge's "merged_from" entries holds one).
nlohmann::ordered_json part_json(const ManifestPart& p);

/// "annotation" and "shard_list": a file of the dataset, named, with its size or CRC-32.
struct ManifestAnnotation {
  std::string name;
  uint64_t size = 0;
  bool operator==(const ManifestAnnotation&) const = default;
};
struct ManifestShardList {
  std::string name, crc32;
  bool operator==(const ManifestShardList&) const = default;
};

/// manifest.json, every key convert and merge write, in the order to_json writes them. A key
/// a manifest lacks (one written before the key existed) is nullopt or empty; the entries of
/// "inputs" stay JSON objects, those of the provenance lists are typed (provenance.h).
struct Manifest {
  using json = nlohmann::ordered_json;
  std::string tool_name = "tarmac", tool_version;  ///< "tool"
  std::vector<std::string> command_line;
  json options = json::object();       ///< as the command line named them
  std::optional<json> output_options;  ///< an object: what merge compares between parts
  std::optional<json> merged_from;     ///< an array: merge's parts
  json inputs = json::array();         ///< objects: path, size, crc32, members, error
  std::optional<json> table;           ///< an object: convert --table's provenance
  /// An array: convert --dedup-against's references (path, labels_crc32), verified when read.
  std::optional<json> dedup_against;
  std::optional<ManifestResumed> resumed;
  std::optional<ManifestPart> part;
  std::optional<ManifestCounts> counts;
  std::optional<std::vector<ManifestShard>> shards;
  std::optional<ManifestAnnotation> annotation;
  std::optional<std::string> labels_crc32;
  json schema = json::object();
  std::vector<ProvenanceEntry> skipped, ignored, duplicates;
  /// nullopt: a manifest written before columns were recorded (verify checks the files alone).
  std::optional<std::vector<std::pair<std::string, ManifestColumn>>> columns;
  std::optional<ManifestShardList> shard_list;
  /// Keys this version does not know (a later one's), kept in their order and written back
  /// after the known ones, so that a rewrite (`column merge`) loses nothing.
  json unknown = json::object();

  /// The column `name` records, or null.
  const ManifestColumn* column(const std::string& name) const;
  /// Records column `name` (replacing its record) or, with nullopt, removes it.
  void set_column(const std::string& name, const std::optional<ManifestColumn>& record);
};

/// The counts the provenance lists imply: skipped samples, members and inputs by the entries
/// of "skipped" naming a sample, member or archive; ignored members by those of "ignored"
/// naming a member; samples duplicating others by content by its entries coded
/// "duplicate_content", samples without instances by its other entries holding "sample";
/// unused images by its entries coded "unused_image";
/// duplicates by the entries of "duplicates"; shards by "shards". Samples and image bytes,
/// which no list holds, are `samples` and `image_bytes` given.
ManifestCounts counts_from_lists(const Manifest& m, uint64_t samples, uint64_t image_bytes);

/// What does not add up in `m`: each count that its lists contradict, one sentence each
/// ("counts.duplicates is 3 but \"duplicates\" lists 2 entries"). Empty when all agree or the
/// manifest has no counts.
std::vector<std::string> count_problems(const Manifest& m);

/// The manifest as JSON, keys in the order format.md lists them, its unknown keys last.
nlohmann::ordered_json to_json(const Manifest& m);

/// The manifest's text (2-space indented JSON and a newline) with "manifest_crc32" added as
/// its last member: the CRC-32 of the text in which that member's 8 digits read "00000000".
/// Throws InternalError when its counts do not add up (a writer's bug, never written).
std::string sealed_manifest_text(const Manifest& m);

/// Parses manifest.json's text. Checks the type of every known key (a file from anywhere):
/// a wrong one, or a shard entry naming a path, is a ParseError naming the key. Absent keys
/// are left empty; unknown keys are kept. "manifest_crc32" is not kept (check_seal reads it).
Manifest parse_manifest(std::string_view text);

/// The manifest.json of dataset directory `dir`, parsed (parse_manifest); nullopt when there is
/// none or it cannot be opened. Throws ParseError when it is malformed.
std::optional<Manifest> read_manifest(const std::filesystem::path& dir);

/// True when folder `dir` holds a dataset tarmac wrote: its kLabelsFile and kManifestFile, both
/// regular files (links not followed). What a run finds so inside a folder input is not input.
bool holds_dataset(const std::filesystem::path& dir);

/// The seal of manifest.json's `text`: whether it has one, well formed, and whether it is the
/// CRC-32 of the text read with its digits as "00000000".
struct ManifestSeal {
  enum class State : uint8_t { Missing, Malformed, Wrong, Good } state = State::Missing;
  std::string said, computed;  ///< 8 hex digits each (Wrong, Good)
};
ManifestSeal check_seal(std::string_view text);

/// The same seal under another key, for the other documents a run reads back (checkpoint.json's
/// kCheckpointSealKey): `text` is a JSON document whose last field is "KEY": "00000000" (with
/// or without a space after the colon); seal_text puts the CRC-32 of that text in its digits.
ManifestSeal check_seal(std::string_view text, std::string_view key);
std::string seal_text(std::string text, std::string_view key);
inline constexpr std::string_view kCheckpointSealKey = "checkpoint_crc32";

/// The names of the shards the manifest lists (none when it lists none).
std::vector<std::string> manifest_shard_names(const Manifest& m);

/// The label fields `convert --points` and `--boxes` transformed with the image, as the
/// manifest's "output_options" records them (boxes as "NAME:xywh" or "NAME:xyxy").
struct DeclaredGeometry {
  std::vector<std::string> points, boxes;
  /// The boxes are in pixel-edge coordinates (`--box-convention edges`, recorded as such);
  /// false: pixel centres, as `centers` and every dataset written before the flag.
  bool box_edges = false;
  /// The kinds of #38, as recorded: --points3d and --polygons names, --axis-angle as
  /// "NAME:LAYOUT", --camera as "NAME:centers|edges", --masks names.
  std::vector<std::string> points3d, axis_angle, cameras, polygons, masks;
};

/// The fields `manifest` declares as points and boxes; none where it records none (a manifest
/// written by another tool, or malformed there).
DeclaredGeometry declared_geometry(const nlohmann::ordered_json& manifest);
/// The same from the manifest.json of dataset folder `dir` (none when it has none, or one that
/// does not parse): what the reader's augmentation and preview read.
DeclaredGeometry declared_geometry(const std::filesystem::path& dir);

}  // namespace tarmac::format
