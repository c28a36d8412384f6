#pragma once
// A summary of a converted dataset directory, read from its annotation file's header and
// its manifest; O(number of fields), touches no label data.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/manifest.h"

namespace tarmac {

struct DatasetSummary {
  std::string path;
  std::string format;
  uint64_t samples = 0;
  std::string schema_json;         ///< the "schema" metadata entry
  std::vector<std::string> blobs;  ///< stored blob kinds: "__image__", "__depth__", ...
  /// Class names, index = the `cls` value (convert --classes-from-dirs); nullopt when none.
  std::optional<std::vector<std::string>> classes;
  /// The `table` metadata entry (convert --table), JSON object text; empty when none.
  std::string table_json;
  struct Shard {
    std::string name;
    uint64_t size = 0;  ///< on disk; 0 when missing
    bool present = false;
  };
  std::vector<Shard> shards;
  uint64_t annotation_bytes = 0;
  struct Tensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    uint64_t bytes = 0;
  };
  std::vector<Tensor> tensors;
  /// The manifest's counts; nullopt when it has none (or no manifest).
  std::optional<format::ManifestCounts> counts;
  std::string manifest_error;  ///< why the manifest could not be read; empty when it was
  struct ImageSize {
    int32_t width = 0, height = 0;
    uint64_t samples = 0;
  };
  /// How many stored images have each size (`__image__.width/height`), most frequent first
  /// (then by width, height); empty without images or when not asked for (it reads two
  /// columns: O(samples)). With --resize bucket: the buckets.
  std::vector<ImageSize> image_sizes;
};

/// Reads the summary in O(fields + shards), plus O(samples) with `image_sizes`. Throws
/// FatalError when the directory holds no dataset, ParseError when the annotation file is
/// invalid.
DatasetSummary summarize_dataset(const std::string& dir, bool image_sizes = false);

}  // namespace tarmac
