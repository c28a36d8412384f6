#pragma once
// What a conversion is asked to do (convert()'s options), grouped by concern: where samples
// come from, what members and labels are, the table, the transform, the limits, the part of a
// scale-out, provenance, and how the run is controlled. Nothing here is set by convert(); the
// rules between options are checked in one place (check_convert_options).
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/stop.h"
#include "format/field_geometry.h"
#include "source/sample_grouper.h"
#include "table/table.h"
#include "transform/geometry.h"
#include "transform/image_codec.h"

namespace tarmac {

struct ConvertProgress;  // convert/convert.h

/// How many channels stored images have (--channels): 3 (grey sources expanded), 1 (every
/// image converted to grey), or Keep (grey sources stay grey, colour ones 3).
enum class ChannelMode { Three, One, Keep };

/// Where the samples come from.
struct SourceOptions {
  /// Archives, directories, "-" for stdin; s3://bucket/key, s3://bucket/prefix/ (every object
  /// under it, by key), http(s):// URLs, and brace ranges of those (s3://b/x-{000..009}.tar).
  std::vector<std::string> inputs;
  /// Where s3:// inputs (and an s3:// output) go (--endpoint-url); empty: AWS_ENDPOINT_URL,
  /// else AWS's own.
  std::string endpoint_url;
};

/// What an input's members are, and how they group into samples.
struct MemberOptions {
  /// Where a member's key ends: the first dot of its file name (WebDataset's rule) or the last.
  KeyRule key_rule = KeyRule::FirstDot;
  /// Image extensions, in order of preference; an entry may hold a dot ("rgb.png"). A member
  /// whose whole extension is an entry is an image; else one whose extension ends with
  /// "." + an entry (its last extension: "rgb.png" for "png") is, when it is the only one.
  std::vector<std::string> image_exts = {"jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff"};
  bool no_images = false;          ///< a labels-only dataset
  std::vector<std::string> dense;  ///< dense-map suffixes, e.g. "depth.png"
  /// A key in two inputs, or a member name twice in one sample: an error, or keep the first
  /// or the last (Last reads the inputs' member names once more first; no standard input).
  OnDuplicate on_duplicate = OnDuplicate::Error;
};

/// Which labels a sample gets, and which it keeps.
struct LabelOptions {
  /// Label each sample with the folder holding its image: field `cls`, the index of the
  /// folder's name in `classes` (as torchvision's ImageFolder numbers them).
  bool classes_from_dirs = false;
  /// The class names, sorted; when empty, convert() finds them by a pre-pass over every input
  /// (all of them, also under --shard I/N, so that the parts agree).
  std::vector<std::string> classes;
  std::set<std::string> ragged;  ///< fields whose first axis may vary
  /// One output per entry along the first axis of this label field (--instances; empty: one
  /// output per sample); `instance_fields` are sliced alike, the others copied to each.
  std::string instances;
  std::vector<std::string> instance_fields;
  /// Label fields kept (--fields; empty: all) and dropped (--drop-fields), applied after the
  /// fields the geometry uses were used; fields a sample must have (--require: a sample
  /// without one, or with null, is bad).
  std::vector<std::string> keep_fields, drop_fields, require_fields;
};

/// An annotation table (--table): each row is one output sample, made from the members it
/// names (its image; for a split list, dense maps: `MemberOptions::dense` then names member
/// columns) and labelled with its values. Members no row names are not converted.
struct TableInput {
  std::string path;  ///< empty: no table
  TableOptions options;
  std::string prefix;  ///< put in front of every path the table names (--table-prefix)
};

/// An --axis-angle field: rotations as axis-angle vectors, `joints` of them per value (0:
/// as many as the value holds, a `pairs:` layout), and the 0-based joints a flip swaps.
struct AxisAngleField {
  std::string name;
  std::string layout = "root";  ///< format/field_geometry.h's names, or "pairs"
  int64_t joints = 1;
  std::vector<std::pair<int, int>> pairs;
};

/// A --camera field: intrinsics [3, 3] K or [4] (fx, fy, cx, cy); `edges`: its principal
/// point is in pixel-edge coordinates (COLMAP's) rather than pixel centres (OpenCV's).
struct CameraField {
  std::string name;
  bool edges = false;
};

/// What is done to each image and the labels that follow its geometry.
struct TransformOptions {
  GeometryOptions geometry;
  std::string crop_field;  ///< CropMode::Field: label field holding the box
  bool crop_field_xyxy = false;
  std::vector<std::string> points;
  std::vector<std::pair<std::string, bool>> boxes;  ///< field, xyxy
  /// Geometric labels declared so that readers move them (docs/format.md, "Geometric kinds"):
  /// 3D points and axis-angle poses are stored as they are, cameras' intrinsics and polygons'
  /// vertices follow the image; each --masks field (COCO segmentation) is rasterised in the
  /// source image and stored warped, as dense map `__NAME__`, in its place.
  std::vector<std::string> points3d;
  std::vector<AxisAngleField> axis_angle;
  std::vector<CameraField> cameras;
  std::vector<std::string> polygons;
  std::vector<std::string> masks;
  double pad_value = 0;
  OutputFormat format = OutputFormat::Jpeg;
  int quality = 95;
  ChannelMode channels = ChannelMode::Three;
};

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

/// Bounds on what one member, sample or shard may cost.
struct ConvertLimits {
  uint64_t max_pixels = 1ull << 28;
  uint64_t max_member_size = 1ull << 30;
  /// Largest label member (.json, .npy, .npz, .txt, .cls; a zip member by its declared size,
  /// refused before it is inflated): a JSON document costs ~25-40x its text while parsed.
  /// Also a table's largest cell (convert() sets the table's max_cell_bytes from it).
  uint64_t max_label_size = 16ull << 20;
  /// Most outputs one source sample may make (table rows naming one image, --instances
  /// entries): they are held in memory together until the writer takes them.
  uint64_t max_outputs_per_sample = 10000;
  uint64_t group_window = 64ull << 20;
  uint64_t shard_size = 1ull << 30;
};

/// Scale-out (--shard I/N): convert only part `index` of `count` (see select_part).
struct PartOptions {
  uint32_t index = 0;
  uint32_t count = 1;
};

/// Provenance for the manifest.
struct Provenance {
  std::vector<std::string> command_line;
  std::string options_json;  ///< the resolved options, as the CLI sees them
};

/// How the run behaves: its output directory's state, errors, threads, progress and stopping.
struct RunControl {
  bool overwrite = false;
  /// Go on from the checkpoint an interrupted run left in the output directory, if any.
  bool resume = false;
  /// Checkpoints are written when a shard closes and at least this often (0: after every
  /// sample, for tests).
  double checkpoint_seconds = 30;
  int threads = 0;  ///< 0 = all cores
  bool skip_errors = false;
  /// A run that converts no sample publishes an empty dataset (else it fails, saying why).
  bool allow_empty = false;
  /// Updated as the run goes (null: not wanted); see ConvertProgress.
  ConvertProgress* progress = nullptr;
  /// Polled during the run (null: never stops early). Once requested, the run stops reading,
  /// finishes the samples in flight (at most kStopDrainSeconds; at once if urgent()), writes a
  /// checkpoint and throws ConvertStopped with the signal.
  const StopRequest* stop = nullptr;
};

/// -o s3://bucket/prefix/ (docs/cli.md "Remote outputs"): the run stages in a local
/// checkpoint folder, each shard is uploaded as it closes, the manifest last.
struct RemoteOutputOptions {
  /// The local folder the run stages and checkpoints in (--checkpoint-dir; empty:
  /// remote_checkpoint_dir()'s default).
  std::string checkpoint_dir;
  /// Files above this size are sent as a multipart upload of parts this size
  /// (--multipart-size; at least 5 MiB, S3's smallest part).
  uint64_t multipart_size = 64ull << 20;
  /// Go on without the lock object when the server does not do conditional PUTs (--no-lock):
  /// the lock is then checked and written, but not atomically.
  bool no_lock = false;
};

struct ConvertOptions {
  SourceOptions source;
  std::string output;  ///< dataset directory, or s3://bucket/prefix/
  RemoteOutputOptions remote_output;
  MemberOptions members;
  LabelOptions labels;
  TableInput table;
  TransformOptions transform;
  DedupOptions dedup;
  ConvertLimits limits;
  PartOptions part;
  Provenance provenance;
  RunControl run;
};

/// Refuses (UsageError) --channels that --format cannot store: 1 or keep with WebP or raw, 1
/// with keep.
void check_channels_format(const TransformOptions& t);

/// Refuses (UsageError) a part count of 0 or a part index not below it.
void check_part(const PartOptions& p);

/// The longest side `f` can store: JPEG 65500, WebP 16383, PNG 1000000 (what libpng reads by
/// default), raw INT32_MAX.
int64_t output_side_limit(OutputFormat f);

/// 1 for ChannelMode::One, else 3 (the most a stored image has).
int output_channels(ChannelMode c);

/// Refuses (UsageError, naming the flags, the numbers and the fix) a run whose outputs, as
/// --size, --resize and --bucket-* decide them, would be over --max-pixels or over the longest
/// side --format can store: before anything is read or written (docs/cli.md, "Limits").
void check_output_bound(const ConvertOptions& o);

/// Refuses (SampleError, BadImage) one output image of `width` x `height` over the longest side
/// of t.format or over `max_pixels`: the sizes the flags do not decide alone (--resize shorter
/// or none, a box crop), checked per sample before the output is allocated.
void check_output_size(int64_t width, int64_t height, const TransformOptions& t,
                       uint64_t max_pixels);

/// Parses an --axis-angle value, NAME[:LAYOUT] (LAYOUT: root, the default; smpl, smpl-body,
/// smplx-body, mano-left, mano-right; pairs:A-B,C-D,...). Throws UsageError naming the value.
AxisAngleField parse_axis_angle_field(const std::string& text);

/// Parses a --camera value, NAME[:centers|edges]. Throws UsageError naming the value.
CameraField parse_camera_field(const std::string& text);

/// Refuses (UsageError naming the table, the column and its shape) an --axis-angle or --camera
/// column of `table` whose rows all have a shape the declaration cannot take: the table shows
/// it before any sample is converted (per-sample values are checked as they come).
void check_table_geometry(const Table& table, const TransformOptions& t);

/// The geometric kinds the options declare, by field name (the schema's `geometry`).
std::vector<std::pair<std::string, FieldGeometry>> declared_kinds(const TransformOptions& t);

/// Refuses (UsageError, naming the options and the fix) options that cannot go together, or
/// a part that does not exist (check_part), or sizes over their bounds (check_output_bound).
/// convert() calls it before it reads anything.
void check_convert_options(const ConvertOptions& o);

}  // namespace tarmac
