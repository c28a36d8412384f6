#pragma once
// The converter: inputs -> samples -> transform -> shards + one annotation file.
// This is the library's one entry point for `tarmac convert`.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stop.h"
#include "format/field_spec.h"
#include "source/sample_grouper.h"
#include "table/table.h"
#include "transform/geometry.h"
#include "transform/image_codec.h"

namespace tarmac {

/// How many channels stored images have (--channels): 3 (grey sources expanded), 1 (every
/// image converted to grey), or Keep (grey sources stay grey, colour ones 3).
enum class ChannelMode { Three, One, Keep };

/// convert --dedup (docs/cli.md): duplicates by content, decided in input order (the first is
/// kept), each dropped one recorded in the manifest's `ignored` list (code duplicate_content).
struct DedupOptions {
  /// None: no deduplication; Exact: the same decoded pixels; Near: also a perceptual hash
  /// within `distance` bits (format.md 1.5).
  enum class Mode { None, Exact, Near };
  Mode mode = Mode::None;
  int distance = 4;  ///< Near: the largest Hamming distance that is a duplicate (0..32)
  /// Datasets whose samples (their `__phash__` column) count as kept before this run's.
  std::vector<std::string> against;
  bool enabled() const { return mode != Mode::None; }
};

struct ConvertOptions {
  /// Archives, directories, "-" for stdin; s3://bucket/key, s3://bucket/prefix/ (every object
  /// under it, by key), http(s):// URLs, and brace ranges of those (s3://b/x-{000..009}.tar).
  std::vector<std::string> inputs;
  /// Where s3:// inputs go (--endpoint-url); empty: AWS_ENDPOINT_URL, else AWS's own.
  std::string endpoint_url;
  std::string output;  ///< dataset directory
  bool overwrite = false;
  /// Go on from the checkpoint an interrupted run left in the output directory, if any.
  bool resume = false;
  /// Checkpoints are written when a shard closes and at least this often (0: after every
  /// sample, for tests).
  double checkpoint_seconds = 30;

  // What members are.
  /// Where a member's key ends: the first dot of its file name (WebDataset's rule) or the last.
  KeyRule key_rule = KeyRule::FirstDot;
  /// Image extensions, in order of preference; an entry may hold a dot ("rgb.png"). A member
  /// whose whole extension is an entry is an image; else one whose extension ends with
  /// "." + an entry (its last extension: "rgb.png" for "png") is, when it is the only one.
  std::vector<std::string> image_exts = {"jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff"};
  bool no_images = false;  ///< a labels-only dataset
  /// Label each sample with the folder holding its image: field `cls`, the index of the
  /// folder's name in `classes` (as torchvision's ImageFolder numbers them).
  bool classes_from_dirs = false;
  /// The class names, sorted; when empty, convert() finds them by a pre-pass over every input
  /// (all of them, also under --shard I/N, so that the parts agree).
  std::vector<std::string> classes;
  std::vector<std::string> dense;  ///< dense-map suffixes, e.g. "depth.png"
  std::set<std::string> ragged;    ///< fields whose first axis may vary
  /// An annotation table (--table; empty: none): each row is one output sample, made from the
  /// members it names (its image; for a split list, dense maps: `dense` then names member
  /// columns) and labelled with its values. Members no row names are not converted.
  std::string table;
  TableOptions table_options;
  std::string table_prefix;  ///< put in front of every path the table names (--table-prefix)
  /// Set by convert(): the annotation file's `table` metadata entry (JSON object text).
  std::string table_metadata;
  /// One output per entry along the first axis of this label field (--instances; empty: one
  /// output per sample); `instance_fields` are sliced alike, the others copied to each.
  std::string instances;
  std::vector<std::string> instance_fields;
  /// Label fields kept (--fields; empty: all) and dropped (--drop-fields), applied after the
  /// fields the geometry uses were used; fields a sample must have (--require: a sample
  /// without one, or with null, is bad).
  std::vector<std::string> keep_fields, drop_fields, require_fields;

  // Transform.
  GeometryOptions geometry;
  std::string crop_field;  ///< CropMode::Field: label field holding the box
  bool crop_field_xyxy = false;
  std::vector<std::string> points;
  std::vector<std::pair<std::string, bool>> boxes;  ///< field, xyxy
  double pad_value = 0;
  OutputFormat format = OutputFormat::Jpeg;
  int quality = 95;
  ChannelMode channels = ChannelMode::Three;
  DedupOptions dedup;

  // Limits and behaviour.
  uint64_t max_pixels = 1ull << 28;
  uint64_t max_member_size = 1ull << 30;
  /// Largest label member (.json, .npy, .npz, .txt, .cls; a zip member by its declared size,
  /// refused before it is inflated): a JSON document costs ~25-40x its text while parsed.
  /// Also a table's largest cell (convert() sets table_options.max_cell_bytes from it).
  uint64_t max_label_size = 16ull << 20;
  /// Most outputs one source sample may make (table rows naming one image, --instances
  /// entries): they are held in memory together until the writer takes them.
  uint64_t max_outputs_per_sample = 10000;
  uint64_t group_window = 64ull << 20;
  uint64_t shard_size = 1ull << 30;
  int threads = 0;  ///< 0 = all cores
  bool skip_errors = false;
  /// A run that converts no sample publishes an empty dataset (else it fails, saying why).
  bool allow_empty = false;
  /// A key in two inputs, or a member name twice in one sample: an error, or keep the first
  /// or the last (Last reads the inputs' member names once more first; no standard input).
  OnDuplicate on_duplicate = OnDuplicate::Error;

  // Scale-out (--shard I/N): convert only part `part_index` of `part_count` (see select_part).
  uint32_t part_index = 0;
  uint32_t part_count = 1;

  // Provenance for the manifest.
  std::vector<std::string> command_line;
  std::string options_json;  ///< the resolved options, as the CLI sees them

  /// Updated as the run goes (null: not wanted); see ConvertProgress.
  struct ConvertProgress* progress = nullptr;

  /// Polled during the run (null: never stops early). Once requested, the run stops reading,
  /// finishes the samples in flight (at most kStopDrainSeconds; at once if urgent()), writes a
  /// checkpoint and throws ConvertStopped with the signal.
  const StopRequest* stop = nullptr;
};

/// The longest a graceful stop spends finishing the samples in flight before it drops them.
inline constexpr double kStopDrainSeconds = 5;

/// Thrown by convert() when a run ends before it finishes: by an error (signal() 0; what() is
/// the error's message) or by a stop request (signal() its number). kept_samples(): the
/// converted samples kept in the output's staging directory for --resume (nullopt: nothing
/// kept, the staging directory removed).
class ConvertStopped : public FatalError {
 public:
  ConvertStopped(const std::string& what, int signal, std::optional<uint64_t> kept_samples,
                 bool bad_sample = false)
      : FatalError(what), signal_(signal), kept_(kept_samples), bad_sample_(bad_sample) {}
  int signal() const { return signal_; }
  std::optional<uint64_t> kept_samples() const { return kept_; }
  /// A bad sample under --on-error fail stopped it (`--resume --on-error skip` goes past it).
  bool bad_sample() const { return bad_sample_; }

 private:
  int signal_;
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
  uint64_t shards = 0;
  uint64_t image_bytes = 0;
  uint64_t annotation_bytes = 0;
  uint64_t input_bytes = 0;
  /// Remote inputs: failed requests retried, and the bytes their Range requests did not fetch
  /// again (the offsets they resumed from).
  uint64_t remote_retries = 0;
  uint64_t remote_resumed_bytes = 0;
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

/// How --shard I/N splits the input: with at least N inputs, part I gets the contiguous
/// block of inputs [I*M/N, (I+1)*M/N) (so parts merged in order keep the single run's
/// order); with fewer inputs, every part reads all of them and keeps the samples whose
/// sequence number (order of first appearance) is I modulo N.
enum class PartSplit { None, Inputs, Samples };

/// The split a run uses, and for PartSplit::Inputs the inputs of its part (in order).
PartSplit select_part(const ConvertOptions& options, std::vector<std::string>* part_inputs);

/// Runs a conversion, holding the output directory's lock (write/output_lock.h) throughout.
/// Throws FatalError before it starts (options, a locked or non-empty output, a refused
/// resume), else ConvertStopped: for the first bad sample with skip_errors off, any error on
/// the way, or a stop request. Either way nothing is left in the output directory that looks
/// like a dataset, and the last checkpoint is kept for --resume when there is one.
/// `options.progress`, when set, is updated throughout.
ConvertResult convert(const ConvertOptions& options);

}  // namespace tarmac
