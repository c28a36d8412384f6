#pragma once
// The names and constants of the dataset format (docs/format.md), written once: the writer,
// the reader, verify and merge all take them from here.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/dtype.h"

namespace tarmac::format {

/// The `format` metadata entry this version writes and reads.
inline constexpr std::string_view kFormatName = "tarmac/1";
inline constexpr const char* kLabelsFile = "labels.safetensors";
inline constexpr const char* kManifestFile = "manifest.json";
/// Where a run writes until it publishes; its presence without kLabelsFile is an unfinished run.
inline constexpr const char* kStagingDir = ".tarmac-partial";
inline constexpr const char* kCheckpointFile = "checkpoint.json";
/// The output directory's lock (write/output_lock.h): held (flock) by the one process writing
/// into the directory, removed when it ends; never part of a dataset.
inline constexpr const char* kLockFile = ".tarmac-lock";
/// The other files a run writes in kStagingDir (besides shards, kCheckpointFile, kLabelsFile,
/// kManifestFile, kShardListFile and FILE.tmp on their way to being renamed): the label column
/// spill, the logs of what was skipped, ignored and found twice, the --dedup index, the record
/// of the objects uploaded to an -o s3:// prefix.
inline constexpr const char* kSpillFile = "columns.spill";
inline constexpr const char* kSkippedLog = "skipped.jsonl";
inline constexpr const char* kIgnoredLog = "ignored.jsonl";
inline constexpr const char* kDuplicatesLog = "duplicates.jsonl";
inline constexpr const char* kDedupIndexFile = "dedup.index";
inline constexpr const char* kUploadRecordFile = "uploads.json";
/// True for a name a run writes in kStagingDir (above): what `--overwrite` or a new run may
/// remove from an interrupted run's staging directory; anything else there is not tarmac's.
bool is_staging_file_name(std::string_view name);

/// Metadata entries (`__metadata__` of the annotation file).
inline constexpr const char* kMetaFormat = "format";
inline constexpr const char* kMetaNumSamples = "num_samples";
inline constexpr const char* kMetaSchema = "schema";
inline constexpr const char* kMetaShards = "shards";
inline constexpr const char* kMetaBlobs = "blobs";
inline constexpr const char* kMetaBlobEncodings = "blob_encodings";
inline constexpr const char* kMetaTool = "tool";
/// JSON array of class names, index = class id (convert --classes-from-dirs); optional.
inline constexpr const char* kMetaClasses = "classes";
/// JSON object {"format", "metadata"}: what an annotation table said beyond its rows (convert
/// --table: COCO's categories with keypoint names and skeleton, HumanData's 0-d members).
inline constexpr const char* kMetaTable = "table";
/// JSON object: blob kind -> its geometric kind ({"kind": "mask"}: convert --masks); optional.
inline constexpr const char* kMetaBlobGeometry = "blob_geometry";
/// The label column of the class ids that kMetaClasses names (I64 scalar per sample).
inline constexpr const char* kClassField = "cls";
/// The label column of the table row (convert --table) or the instance index (--instances) an
/// output sample came from (I64 scalar per sample).
inline constexpr const char* kRowField = "__row__";

/// SDXL's micro-conditioning, written by `--resize bucket` (I32 [2] per sample, SDXL's order):
/// the original image's (height, width), the crop's (top, left) in original pixels (the pixels
/// cut away above and to the left of the region), the output's (height, width).
inline constexpr const char* kOriginalSizeField = "__original_size__";
inline constexpr const char* kCropTopLeftField = "__crop_top_left__";
inline constexpr const char* kTargetSizeField = "__target_size__";

/// convert --dedup: each kept image's 64-bit perceptual hash (format.md 1.5), a label column
/// (U64 scalar per sample) so that later runs deduplicate against it (--dedup-against).
inline constexpr const char* kPhashField = "__phash__";

/// Reserved columns.
inline constexpr const char* kKeyColumn = "__key__";
inline constexpr const char* kAffineColumn = "__affine__";
inline constexpr const char* kImageBlob = "__image__";

/// The most dimensions a tensor of the annotation file may have (sample axis included).
inline constexpr size_t kMaxDims = 8;
/// num_samples is a decimal of at most this many digits (so that N + 1 fits in an int64).
inline constexpr size_t kMaxNumSamplesDigits = 18;

/// The columns every stored blob kind has, in the order the format lists them.
struct BlobColumnSpec {
  const char* suffix;  ///< "shard" -> tensor "__image__.shard"
  DType dtype;
};
inline constexpr BlobColumnSpec kBlobColumns[] = {
    {"shard", DType::I32}, {"offset", DType::I64}, {"size", DType::I64},
    {"crc32", DType::U32}, {"width", DType::I32},  {"height", DType::I32},
};
inline constexpr size_t kNumBlobColumns = std::size(kBlobColumns);
enum BlobColumn : size_t {
  kBlobShard,
  kBlobOffset,
  kBlobSize,
  kBlobCrc32,
  kBlobWidth,
  kBlobHeight
};

/// "__image__" + "shard" -> "__image__.shard".
std::string blob_tensor(std::string_view kind, BlobColumn column);
/// The tensors of a ragged column NAME: "NAME.values", "NAME.offsets".
std::string values_tensor(std::string_view column);
std::string offsets_tensor(std::string_view column);
/// NAME.valid: BOOL [N], 1 where a nullable field's sample has a value.
std::string valid_tensor(std::string_view column);

/// The blob kind of a dense map given by its member suffix: "depth.png" -> "__depth__".
std::string dense_blob_kind(std::string_view suffix);
/// True for a dense map given as a .npy member ("depth.npy"): stored with StoredEncoding::Npy.
bool is_npy_dense(std::string_view suffix);

/// The name of shard `index`: "shard-000042.tar".
std::string shard_name(size_t index);
/// True for names shard_name() makes ("shard-" + six or more digits + ".tar"); a user's
/// "shard-notes.txt" is not one.
bool is_shard_name(std::string_view name);
/// True for a name the `shards` metadata may hold: a plain file name in the dataset directory
/// (not empty, no '/', no NUL, not hidden).
bool is_valid_shard_entry(std::string_view name);

/// How every blob of one kind is encoded (the `blob_encodings` metadata entry), so that no
/// reader needs to look at tar headers. Raw: height x width x 3 bytes, RGB. Source: an image
/// file (input bytes untouched, or a re-encoded dense map) whose magic bytes give its format
/// (JPEG, PNG, WebP, BMP, TIFF). Npy: a dense map as a .npy array (format/npy_blob.h).
enum class StoredEncoding { Jpeg, Png, Webp, Raw, Source, Npy };
/// "jpg", "png", "webp", "rgb", "source", "npy"
std::string_view encoding_name(StoredEncoding e);
std::optional<StoredEncoding> encoding_from_name(std::string_view name);

}  // namespace tarmac::format
