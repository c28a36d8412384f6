#pragma once
// The dataset writer: samples, in order, to image shards and column spill files inside the
// staging directory, then the annotation file. checkpoint() syncs everything written so far and
// describes it; a writer constructed from that description (convert --resume) goes on from
// there as if never interrupted.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <set>
#include <utility>

#include "convert/sample_processor.h"
#include "format/checkpoint.h"
#include "format/field_geometry.h"
#include "labels/schema.h"
#include "transform/image_codec.h"
#include "write/column_store.h"
#include "write/tar_writer.h"

namespace tarmac {

/// What the writer lays out: the blobs each sample stores, the label columns' rules, the
/// annotation file's class list and the shards' size (made by plan_run, run_plan.h).
struct WriterSpec {
  bool images = true;  ///< false: --no-images, labels only (no affine, no blobs)
  OutputFormat format = OutputFormat::Jpeg;  ///< the stored images' encoding (--format)
  std::vector<std::string> dense;            ///< --dense suffixes, one blob kind each
  std::vector<std::string> masks;            ///< --masks fields, one mask blob kind each
  std::set<std::string> ragged;              ///< fields whose first axis may vary
  /// The geometric kinds declared, by field name (the schema's `geometry`).
  std::vector<std::pair<std::string, FieldGeometry>> geometry;
  /// --classes-from-dirs: the class names, by index (the annotation file's `classes`, which
  /// is absent without the flag: a list of none is not the same).
  std::optional<std::vector<std::string>> classes;
  uint64_t shard_size = 1ull << 30;  ///< a shard closes before a sample would take it over
};

class DatasetWriter {
 public:
  /// A new writer in `staging`, or (resume: the writer's part of a checkpoint) the one that
  /// checkpoint describes. Throws FatalError.
  DatasetWriter(WriterSpec spec, std::filesystem::path staging,
                const format::CheckpointWriter* resume);
  ~DatasetWriter();

  /// Syncs shards and spill files and returns what a resumed writer needs.
  format::CheckpointWriter checkpoint();
  /// True once after each shard is closed: a natural point for a checkpoint.
  bool take_shard_closed() { return std::exchange(shard_closed_, false); }
  /// Checks the sample against the schema and stores it. Throws SampleError (nothing stored).
  void add(ProcessedSample& s);
  /// Closes the last shard and writes the annotation file (its `tool` entry says `tool`; its
  /// `table` entry, when not empty, `table_metadata`: JSON object text); returns its path.
  std::filesystem::path finish(const std::string& tool, const std::string& table_metadata = {});

  const Schema& schema() const { return schema_; }
  const std::vector<std::string>& shard_names() const { return shard_names_; }
  /// CRC-32 of each finished shard file, in shard order.
  const std::vector<uint32_t>& shard_crcs() const { return shard_crcs_; }
  /// Sizes of the closed shards, in shard order: the first closed_shards() of shard_names()
  /// (all of them after finish()); their files may be gone (uploaded, -o s3://).
  const std::vector<uint64_t>& shard_sizes() const { return shard_sizes_; }
  size_t closed_shards() const { return shard_sizes_.size(); }
  /// Samples whose image is in each shard, in shard order (the shard list's `nsamples`).
  const std::vector<uint64_t>& shard_samples() const { return shard_samples_; }
  uint64_t samples() const { return samples_; }
  uint64_t blob_bytes() const { return blob_bytes_; }

 private:
  struct BlobColumns;
  void open_label_columns(bool resume);
  void close_shard();
  void write_blobs(const ProcessedSample& s);

  const WriterSpec spec_;
  std::filesystem::path staging_;
  Schema schema_;
  std::unique_ptr<ColumnStore> store_;  // every column's records, in one file
  SpillColumn *keys_, *affine_;         // affine_: null under --no-images
  std::vector<BlobColumns> blobs_;
  std::vector<SpillColumn*> label_cols_;  // of schema_.fields(), in order
  std::unique_ptr<TarWriter> tar_;
  std::vector<std::string> shard_names_;
  std::vector<uint32_t> shard_crcs_;
  std::vector<uint64_t> shard_sizes_;  // of the closed shards, for checkpoints
  std::vector<uint64_t> shard_samples_;
  uint64_t samples_ = 0;
  uint64_t blob_bytes_ = 0;
  uint64_t key_bytes_ = 0;
  bool shard_closed_ = false;
};

}  // namespace tarmac
