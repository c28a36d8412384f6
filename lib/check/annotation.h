#pragma once
// The annotation file of a dataset (DIR/labels.safetensors), memory-mapped and checked
// against docs/format.md by code that shares nothing with write/: `verify`, `cat` and `ls`
// read the format the way any third-party reader would.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/layout.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"

namespace tarmac::check {

/// One thing wrong with a dataset: the file, the sample (key, or "" when none) and what.
struct Problem {
  std::string file;
  std::string sample;
  std::string what;
};

/// Where one stored blob (an image or a dense map) lies, as the annotation file says.
struct BlobRef {
  int32_t shard = 0;
  int64_t offset = 0, size = 0;
  uint32_t crc32 = 0;
  int32_t width = 0, height = 0;
};

/// A checked, read-only view of an annotation file. Every accessor is bounds-checked, so a
/// hostile file gives a Problem or a ParseError, never a crash.
class Annotation {
 public:
  /// Maps and checks DIR/labels.safetensors; every violation is appended to `problems`
  /// (file format::kLabelsFile). `deep` adds the per-sample checks (offsets monotone, keys
  /// UTF-8 and unique, blob references, affines): linear in the number of samples.
  /// Returns false when the file cannot be used at all (missing, not safetensors, a required
  /// tensor missing or of the wrong shape); then no accessor may be called.
  bool open(const std::string& dir, bool deep, std::vector<Problem>& problems);

  uint64_t size() const { return n_; }
  /// Sample i's key; "#i" when the key columns are unusable. Valid while this object lives.
  std::string key(uint64_t i) const;
  /// The sample whose key is `key_or_index`, or `#I` for index I; nullopt if none. Linear.
  std::optional<uint64_t> find(std::string_view key_or_index) const;

  const std::vector<std::string>& shards() const { return layout_.shards; }
  /// Stored blob kinds: "__image__", then "__NAME__" per dense map.
  const std::vector<std::string>& blob_kinds() const { return blob_kinds_; }
  const DatasetLayout& layout() const { return layout_; }
  BlobRef blob(size_t kind, uint64_t i) const;
  /// The label fields; a field whose tensors are unusable has null tensor pointers.
  const std::vector<FieldLayout>& fields() const { return layout_.fields; }
  /// Sample i's labels: {field: value} (strings as strings, `json` fields parsed, numbers as
  /// nested arrays). Throws ParseError when a stored value is out of bounds.
  nlohmann::ordered_json labels_json(uint64_t i) const;
  /// Sample i's affine, row-major 2x3; nullopt for a labels-only dataset.
  std::optional<std::array<double, 6>> affine(uint64_t i) const;

  const MappedFile& file() const { return file_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::string& dir() const { return dir_; }

 private:
  bool check_offsets(const TensorInfo* offsets, uint64_t total, const std::string& column,
                     std::vector<Problem>& problems) const;
  void deep_checks(std::vector<Problem>& problems) const;
  template <typename T>
  T at(const TensorInfo* t, uint64_t i) const;

  std::string dir_;
  MappedFile file_;
  SafetensorsHeader header_;
  uint64_t n_ = 0;
  DatasetLayout layout_;
  std::vector<std::string> blob_kinds_;
  bool keys_ok_ = false;
};

}  // namespace tarmac::check
