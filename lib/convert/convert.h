#pragma once
// The converter: inputs -> samples -> transform -> shards + one annotation file.
// This is the library's one entry point for `tarmac convert`.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stop.h"
#include "convert/convert_options.h"
#include "format/field_spec.h"

namespace tarmac {

/// The longest a graceful stop spends finishing the samples in flight before it drops them.
inline constexpr double kStopDrainSeconds = 5;
/// A stop's drain ends once no sample has been written for this long (a worker inside a long
/// encode): what is left in flight is converted again by --resume.
inline constexpr double kStopIdleSeconds = 1;

/// Thrown by convert() when a run ends before it finishes: by an error (signal() 0; what() is
/// the error's message) or by a stop request (signal() its number). kept_samples(): the
/// converted samples kept in the output's staging directory for --resume (nullopt: nothing
/// kept, the staging directory removed).
class ConvertStopped : public FatalError {
 public:
  ConvertStopped(const std::string& what, int signal, std::optional<uint64_t> kept_samples,
                 bool bad_sample = false)
      : FatalError(what, signal ? Grade::Interrupted : Grade::Fatal, signal),
        kept_(kept_samples),
        bad_sample_(bad_sample) {}
  std::optional<uint64_t> kept_samples() const { return kept_; }
  /// A bad sample under --on-error fail stopped it (`--resume --on-error skip` goes past it).
  bool bad_sample() const { return bad_sample_; }

 private:
  std::optional<uint64_t> kept_;
  bool bad_sample_;
};

/// A bad sample under --on-error fail: what stops the run (inside convert(); the caller sees
/// ConvertStopped with bad_sample()).
class BadSampleError : public FatalError {
 public:
  using FatalError::FatalError;
};

struct Skipped {
  std::string input;  ///< archive path
  std::string what;   ///< sample key or member name
  std::string code;   ///< error_code_name(): "no_image", "bad_json", ...
  std::string reason;
};

/// Where a run's time went, to tell which stage limits it: the reader thread (reading,
/// decompressing, checksumming, grouping), the transform workers, the ordered writer. Each
/// stage's busy fraction is 1 - blocked/total; the stage near 100 % is the limit.
struct StageTimes {
  int threads = 0;                    ///< transform workers
  double reader_seconds = 0;          ///< the reader thread, start to end
  double reader_blocked_seconds = 0;  ///< of which waiting for room (stages behind it full)
  double worker_seconds = 0;          ///< summed over the workers, start to end
  double worker_idle_seconds = 0;     ///< of which waiting for samples (the reader behind)
  double writer_seconds = 0;          ///< the writer, until the last sample is written
  double writer_idle_seconds = 0;     ///< of which waiting for the next sample in order
  double finish_seconds = 0;          ///< after the last sample: labels, manifest, publish
  double first_release_seconds = 0;   ///< reader start to its first samples for the workers
  uint64_t ahead_samples = 0;         ///< converted ahead of their release from the window
  /// What the advice may suggest: the inputs' compression (the first compressed input's:
  /// "gzip", "xz", ...; "" for none), and whether some sample's members were not adjacent.
  std::string input_compression;
  bool members_interleaved = false;

  static double busy(double total, double waiting) {
    return total > 0 ? std::clamp(1.0 - waiting / total, 0.0, 1.0) : 0.0;
  }
  double reader_busy() const { return busy(reader_seconds, reader_blocked_seconds); }
  double worker_busy() const { return busy(worker_seconds, worker_idle_seconds); }
  double writer_busy() const { return busy(writer_seconds, writer_idle_seconds); }
};

struct ConvertResult {
  uint64_t samples = 0;
  uint64_t skipped_samples = 0;
  uint64_t no_image_samples = 0;  ///< of skipped_samples, those without an image member
  /// Samples whose --instances field had no entries: no output, each in the manifest's
  /// ignored list (code no_instances).
  uint64_t no_instance_samples = 0;
  /// --table: images in the inputs that no row names (not converted; in the ignored list,
  /// code unused_image), and the rows converted.
  uint64_t unused_images = 0;
  uint64_t ignored_members = 0;
  uint64_t error_members = 0;
  uint64_t duplicates = 0;  ///< samples and members left out under --on-duplicate first|last
  /// --dedup: samples left out as duplicates by content (in the ignored list, code
  /// duplicate_content).
  uint64_t duplicate_content_samples = 0;
  /// The first of them this run left out, as "sample 'KEY': REASON" (for the message of a run
  /// that kept no sample); empty when none.
  std::string first_duplicate_content;
  uint64_t shards = 0;
  uint64_t image_bytes = 0;
  uint64_t annotation_bytes = 0;
  uint64_t input_bytes = 0;
  /// Remote inputs: failed requests retried, and the bytes their Range requests did not fetch
  /// again (the offsets they resumed from).
  uint64_t remote_retries = 0;
  uint64_t remote_resumed_bytes = 0;
  /// -o s3://: objects written (of which multipart), their bytes, requests retried, and the
  /// objects a resumed run found complete on the server and did not send again.
  uint64_t uploaded_objects = 0, uploaded_multipart = 0, uploaded_bytes = 0;
  uint64_t upload_retries = 0, upload_skipped = 0;
  double seconds = 0;
  std::vector<FieldSpec> schema;
  /// Per schema field: samples without a value (nullable fields have some).
  std::vector<uint64_t> missing_values;
  /// Fields whose values' types conflicted, kept as JSON text: what each held, for a warning
  /// ("field 'x' holds 3 numbers, 2 strings and 1 other JSON value: kept as JSON text").
  std::vector<std::string> field_warnings;
  std::vector<Skipped> skipped;           ///< first 20, for the summary; all are in the manifest
  std::vector<std::string> input_errors;  ///< inputs not read to their end (under skip)
  /// Input directories that hold the output directory, which was left out of them (never read
  /// as input): "input '.' holds the output directory 'out'...".
  std::vector<std::string> notes;
  bool resumed = false;           ///< went on from an interrupted run's checkpoint
  uint64_t resumed_samples = 0;   ///< samples that run had converted
  bool already_complete = false;  ///< --resume found a finished dataset: nothing done
  StageTimes stages;              ///< where the time went (not on --resume's replay)
};

/// What a running conversion has done so far. convert() updates it as it goes (while it reads,
/// at least every 100 ms); any thread may read it at any time, e.g. to draw a progress line.
/// Counts are of this run's part and include what a resumed run had done before.
struct ConvertProgress {
  /// Stopped: a stop request ended the run; the counts are those its checkpoint keeps.
  enum class Phase {
    Starting,
    ClassScan,
    FirstScan,
    LastScan,
    Converting,
    Finishing,
    Done,
    Stopped
  };
  std::atomic<Phase> phase{Phase::Starting};
  std::atomic<uint64_t> samples{0};  ///< written into the dataset (outputs, with `outputs`)
  std::atomic<uint64_t> skipped{0};  ///< bad samples left out (--on-error skip)
  /// --instances: a sample makes as many outputs as its field has entries, so `samples` and
  /// `skipped` count outputs while `handled` and `seen` count the input's samples.
  std::atomic<bool> outputs{false};
  /// Samples whose work is done: written, skipped, or left out as duplicates. With --table,
  /// rows (as `seen`): a group of rows sharing an image is one sample of the feed.
  std::atomic<uint64_t> handled{0};
  /// Samples met in the input so far (grouped, or waiting in the group window); the total once
  /// input_done.
  std::atomic<uint64_t> seen{0};
  std::atomic<bool> input_done{false};
  std::atomic<uint64_t> bytes_read{0};   ///< input bytes read in this phase
  std::atomic<uint64_t> total_bytes{0};  ///< input bytes this phase reads (0: unknown, stdin)
};

/// What a phase does, for a progress line: "converting", "finding the class folders
/// (--classes-from-dirs)", ...
const char* phase_text(ConvertProgress::Phase phase);

/// The one line for a run out of memory (std::bad_alloc) in `phase`: what it was doing, and
/// the flags that bound a run's memory (docs/cli.md, Memory bounds).
std::string out_of_memory_text(ConvertProgress::Phase phase);

/// How --shard I/N splits the input: with at least N inputs, part I gets the contiguous
/// block of inputs [I*M/N, (I+1)*M/N) (so parts merged in order keep the single run's
/// order); with fewer inputs, every part reads all of them and keeps the samples whose
/// sequence number (order of first appearance) is I modulo N.
enum class PartSplit { None, Inputs, Samples };

/// The split a run uses, and for PartSplit::Inputs the inputs of its part (in order). Throws
/// UsageError for a part that does not exist (check_part).
PartSplit select_part(const ConvertOptions& options, std::vector<std::string>* part_inputs);

/// The local folder a run into `output` (s3://bucket/prefix/) stages in: `checkpoint_dir`
/// when given, else ./.tarmac-checkpoint/BUCKET/HASH (HASH: 8 hex digits of the prefix), so
/// that a --resume of the same command finds it.
std::string remote_checkpoint_dir(const std::string& output, const std::string& checkpoint_dir);

/// Runs a conversion, holding the output directory's lock (write/output_lock.h) throughout.
/// Throws UsageError for wrong options (check_convert_options; --resume of standard input)
/// before it reads anything; FatalError before it starts (a locked or non-empty output, a
/// refused resume); else ConvertStopped: for the first bad sample with skip_errors off, any
/// error on the way, or a stop request. Either way nothing is left in the output directory
/// that looks like a dataset, and the last checkpoint is kept for --resume when there is one.
/// `options.run.progress`, when set, is updated throughout.
ConvertResult convert(const ConvertOptions& options);

}  // namespace tarmac
