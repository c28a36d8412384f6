#pragma once
// The one parser of a dataset's annotation file layout (docs/format.md 1): which tensors it
// must hold, with which dtypes and shapes, and what its metadata says. Constant time in the
// number of samples (per-sample checks belong to whoever reads the samples). Every reader
// builds on it: the training reader throws at the first problem; `verify` collects them all.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/field_spec.h"
#include "format/names.h"
#include "format/safetensors.h"

namespace tarmac {

/// One stored blob kind ("__image__", "__depth__") and its columns (format::kBlobColumns order).
struct BlobLayout {
  std::string kind;
  /// How its blobs are encoded; nullopt for files written before `blob_encodings` existed
  /// (then a `.rgb` tar member name marks raw pixels, and magic bytes give the rest).
  std::optional<format::StoredEncoding> encoding;
  std::array<const TensorInfo*, format::kNumBlobColumns> columns{};
};

/// One label column: its schema entry and its tensors.
struct FieldLayout {
  FieldSpec spec;
  const TensorInfo* values = nullptr;   ///< NAME, or NAME.values when ragged
  const TensorInfo* offsets = nullptr;  ///< NAME.offsets when ragged
  const TensorInfo* valid = nullptr;    ///< NAME.valid [N] BOOL when nullable
};

/// The checked layout. TensorInfo pointers point into the SafetensorsHeader it was read from
/// and are valid while that header lives, unchanged. In the collecting mode a column whose
/// tensors are wrong has null pointers (and its problem was reported).
struct DatasetLayout {
  uint64_t num_samples = 0;
  std::vector<std::string> shards;  ///< the `shards` metadata: plain file names, unique
  std::vector<BlobLayout> blobs;    ///< "__image__" first; empty for a labels-only dataset
  const TensorInfo* key_values = nullptr;
  const TensorInfo* key_offsets = nullptr;
  const TensorInfo* affine = nullptr;  ///< [N, 2, 3] F64 when there are blobs
  std::vector<FieldLayout> fields;     ///< in schema order
  /// The `classes` metadata: class names, index = the `cls` column's value; nullopt when the
  /// file has none.
  std::optional<std::vector<std::string>> classes;
  /// The `table` metadata (convert --table): JSON object text; nullopt when the file has none.
  std::optional<std::string> table;
  /// The blob kinds `blob_geometry` marks as masks (convert --masks), in `blobs` order.
  std::vector<std::string> mask_blobs;

  bool has_images() const { return !blobs.empty(); }
  const FieldLayout* find_field(std::string_view name) const;
};

/// What a writer puts in the `__metadata__` map; read_layout reads it back.
struct LayoutMetadata {
  uint64_t num_samples = 0;
  std::vector<FieldSpec> fields;
  std::vector<std::string> shards;
  /// Kind and encoding; when an encoding is unknown (merged from files written before
  /// `blob_encodings`), the entry is left out, as those files had it.
  std::vector<std::pair<std::string, std::optional<format::StoredEncoding>>> blobs;
  std::string tool;  ///< "tarmac 0.1.0"
  /// Class names (--classes-from-dirs), written as the `classes` entry when set.
  std::optional<std::vector<std::string>> classes;
  /// What an annotation table said beyond its rows (convert --table): a JSON object
  /// {"format": ..., "metadata": {...}} (COCO's categories and skeleton), as the `table` entry.
  std::optional<std::string> table;
  /// Blob kinds holding masks (convert --masks), written as the `blob_geometry` entry.
  std::vector<std::string> mask_blobs;
};
std::map<std::string, std::string> layout_metadata(const LayoutMetadata& m);

/// Reads the layout; throws ParseError ("labels.safetensors: ..." and the reason) at the first
/// problem.
DatasetLayout read_layout(const SafetensorsHeader& header);

/// Reads the layout, appending every problem found to `problems`. Returns nullopt when the
/// file cannot be used at all (no sample count, unusable key columns or blob metadata).
std::optional<DatasetLayout> read_layout(const SafetensorsHeader& header,
                                         std::vector<std::string>& problems);

}  // namespace tarmac
