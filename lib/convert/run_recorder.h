#pragma once
// The writer's side of a conversion: entries come in order from the pipeline; each sample is
// stored by the DatasetWriter or, when bad, recorded (or stops the run under --on-error fail);
// duplicates, ignored members and skips go to the manifest's JSON-lines logs with their codes;
// under --dedup, a sample whose image duplicates a kept one by content is left out here, in
// input order, whatever the number of threads;
// checkpoints are written when a shard closes and at least every --checkpoint-every seconds.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/dataset_writer.h"
#include "convert/dedup_index.h"
#include "convert/pipeline.h"
#include "format/checkpoint.h"
#include "format/provenance.h"
#include "source/input_reader.h"
#include "write/json_log.h"

namespace tarmac {

/// What the recorder needs of the run: the error policy, the inputs (named in the duplicates
/// list), how often to checkpoint, and --dedup.
struct RecorderSpec {
  bool skip_errors = false;         ///< --on-error skip: a bad sample is logged, not fatal
  std::vector<std::string> inputs;  ///< every input of the run, by index
  double checkpoint_seconds = 30;   ///< at least this often (0: after every entry)
  DedupOptions dedup;               ///< --dedup, with its references
};

/// What the recorder counted (a resumed run's checkpoint's counts included) and the warnings it
/// gave, for convert() to put in its ConvertResult.
struct RecordedCounts {
  uint64_t skipped_samples = 0;
  uint64_t ignored_members = 0;
  uint64_t duplicates = 0;
  uint64_t no_instance_samples = 0;
  uint64_t duplicate_content_samples = 0;
  std::string first_duplicate_content;  ///< "sample 'K': why", of the first --dedup drop
  std::vector<std::string> field_warnings;
};

class RunRecorder {
 public:
  /// `resume`: the checkpoint this run goes on from (null for a fresh run); its counts are
  /// counts()' start. `fingerprint` is what each checkpoint records of the run
  /// (run_fingerprint).
  RunRecorder(RecorderSpec spec, std::filesystem::path staging, nlohmann::ordered_json fingerprint,
              const format::Checkpoint* resume, const InputReader& reader, DatasetWriter& writer);

  /// Handles the next entry in order. Throws BadSampleError naming input, sample and reason for a
  /// bad sample under --on-error fail.
  void handle(Entry& e);
  /// What it has counted so far.
  const RecordedCounts& counts() const { return counts_; }
  /// Entries handled so far, in order (with those before a resumed run's checkpoint).
  uint64_t entries_done() const { return entries_done_; }
  /// Syncs everything written so far and records it in checkpoint.json, atomically.
  void write_checkpoint();
  /// Called after each checkpoint is written (-o s3:// uploads the shards it covers).
  void on_checkpoint(std::function<void()> f) { on_checkpoint_ = std::move(f); }

  struct Lists {
    std::vector<format::ProvenanceEntry> skipped, ignored, duplicates;
  };
  /// The logs' records (closes them).
  Lists read_all();

 private:
  void entry_done();
  void store(const std::string& input_path, ProcessedSample& s);
  /// --dedup: true when `s` duplicates a kept sample (then recorded in the ignored list); else
  /// adds its `__phash__` field.
  bool drop_duplicate(const std::string& input_path, ProcessedSample& s);
  /// Throws BadSampleError under --on-error fail; else counts and logs the skipped sample.
  void record_bad(const std::string& input_path, const std::string& key, const std::string& error,
                  ErrorCode code);

  const RecorderSpec spec_;
  std::filesystem::path staging_;
  nlohmann::ordered_json fingerprint_;
  const InputReader& reader_;
  DatasetWriter& writer_;
  RecordedCounts counts_;
  JsonLog skipped_, ignored_, duplicates_;
  std::unique_ptr<DedupIndex> dedup_;  // null without --dedup
  uint64_t entries_done_ = 0;  // entries handled, in order (those before the checkpoint too)
  // Where the reader stood after the last entry handled (a resumed run's checkpoint's, as
  // recorded, until it handles one).
  ReadMark mark_;
  bool mark_from_run_ = false;
  std::optional<format::CheckpointRead> resume_read_;
  std::vector<std::string> image_sized_warned_;  // fields warned of (image_sized_labels)
  std::vector<std::string> geometry_warned_;     // fields warned of (undeclared_geometry)
  Clock::time_point last_checkpoint_ = Clock::now();
  std::function<void()> on_checkpoint_;
};

}  // namespace tarmac
