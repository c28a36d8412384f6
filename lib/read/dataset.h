#pragma once
// A converted dataset opened for training: labels.safetensors and every shard memory-mapped,
// samples read zero-copy. The format is the contract (docs/format.md); nothing here
// includes write/. Lifetimes: every span, string_view and TensorView a Dataset hands out
// points into its memory maps and is valid while the Dataset is open (not moved from).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "format/field_spec.h"
#include "format/names.h"

namespace tarmac {

/// The data of an opened dataset contradicts itself at access time: a ragged offset out of
/// order, a shard index out of range, a blob beyond its shard. The message names the sample.
class DataError : public Error {
 public:
  explicit DataError(const std::string& what) : Error(what, Grade::Fatal) {}
};

/// The most dimensions a label tensor may have; Dataset refuses files with more.
inline constexpr size_t kMaxDims = format::kMaxDims;

/// A tensor shape held inline (no allocation per access).
struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  size_t ndim = 0;

  std::span<const int64_t> span() const { return {dims.data(), ndim}; }
  int64_t operator[](size_t k) const { return dims[k]; }
  /// Product of the dimensions (1 for a scalar).
  int64_t elements() const;
};

/// A typed, read-only view of label bytes: one sample's value or a whole column.
/// Valid while the Dataset that returned it is open.
struct TensorView {
  DType dtype = DType::U8;
  Shape shape;
  std::span<const uint8_t> bytes;

  /// The elements as T; throws ArgumentError when sizeof(T) differs from the dtype's.
  template <class T>
  std::span<const T> as() const {
    if (sizeof(T) != dtype_size(dtype))
      throw ArgumentError("TensorView::as: element size " + std::to_string(sizeof(T)) +
                          " does not match dtype " + std::string(dtype_name(dtype)));
    // Tensors are aligned to their element size in the file (docs/format.md 1).
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  /// The bytes as text (string and json fields).
  std::string_view text() const {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }
};

/// A whole column: fixed fields have `values` of shape [N, ...] and empty `offsets`;
/// ragged fields have `values` [total, ...] and `offsets` [N+1] (not checked as a whole:
/// the per-sample accessors check the two offsets they use). Valid while the Dataset is open.
struct Column {
  TensorView values;
  std::span<const int64_t> offsets;
};

/// Where one stored blob lies, read from the annotation file (checked against its shard).
struct BlobRef {
  int32_t shard = 0;
  int64_t offset = 0;
  int64_t size = 0;
  uint32_t crc32 = 0;
  int32_t width = 0;
  int32_t height = 0;
};

/// How a blob is encoded (the extension of its tar member). Npy: a dense map stored as .npy.
enum class BlobEncoding { Jpeg, Png, Webp, Bmp, Tiff, Raw, Npy };

/// Decoded pixels, row-major HWC: RGB uint8 for images; dense maps keep their channel
/// count and bit depth (dtype U8 or U16; a .npy dense map: its own dtype).
struct Pixels {
  int width = 0, height = 0, channels = 0;
  DType dtype = DType::U8;
  std::vector<uint8_t> data;
};

class MappedFile;
class DerivedColumn;

/// The local path of shard k of a dataset whose shards are not all in its folder (a cached copy
/// of an s3:// dataset: read/cached_dataset.h), fetching it if need be. Called on the shard's
/// first use, from whichever thread reads it first; called again after it threw.
using ShardFetcher = std::function<std::string(size_t shard)>;

/// An opened tarmac dataset directory. Opening maps the files and validates everything
/// later accesses trust, in O(number of fields + shards): no label page is touched until
/// asked. Per-sample checks happen at access and throw DataError. Thread-safe for reads.
class Dataset {
 public:
  /// Opens `dir`. Throws FatalError when it holds no complete dataset or a file cannot be
  /// mapped (a missing shard included), ParseError when labels.safetensors is invalid.
  explicit Dataset(const std::string& dir);
  /// Opens `dir` holding the annotation file (and manifest); shard k is mapped on its first
  /// use from the path `fetch` returns, and stays mapped while the Dataset is open.
  Dataset(const std::string& dir, ShardFetcher fetch);
  ~Dataset();
  Dataset(Dataset&&) noexcept;
  Dataset& operator=(Dataset&&) noexcept;

  const std::string& path() const { return dir_; }
  /// The number of samples N.
  size_t size() const { return n_; }
  /// The `__metadata__` map of the annotation file.
  const std::map<std::string, std::string>& metadata() const;
  /// The label fields, in the schema's order.
  const std::vector<FieldSpec>& fields() const { return fields_; }
  /// The field called `name` (a schema field or "__affine__"), or nullptr.
  const FieldSpec* find_field(std::string_view name) const;
  /// Stored blob kinds: "__image__", then "__NAME__" per dense map; empty without images.
  const std::vector<std::string>& blob_kinds() const { return blob_kinds_; }
  const std::vector<std::string>& shard_names() const { return shard_names_; }
  /// The bytes of shard k (a whole tar file; fetched first if it is fetched on use); valid
  /// while the Dataset is open.
  std::span<const uint8_t> shard_bytes(size_t k) const;
  bool has_images() const { return !blob_kinds_.empty(); }

  /// Sample i's key. Throws IndexError for i >= size(), DataError for bad offsets.
  std::string_view key(size_t i) const;
  /// Sample i's value of field `name` (ragged: its slice). Throws ArgumentError for
  /// an unknown field, IndexError, DataError.
  TensorView value(std::string_view name, size_t i) const;
  /// Whether sample i has a value of field `name`: false where a nullable field's sample
  /// has none (then value() gives zeros, or an empty slice when ragged). Throws
  /// ArgumentError for an unknown field, IndexError.
  bool has_value(std::string_view name, size_t i) const;
  /// The whole column of field `name` (any tensor name of the file is accepted too; a
  /// nullable field's mask is the tensor NAME.valid).
  Column column(std::string_view name) const;
  /// Names of the derived columns (DIR/columns/NAME.safetensors, docs/format.md 9), sorted;
  /// listed at open.
  const std::vector<std::string>& derived_names() const { return derived_names_; }
  /// Derived column `name`, opened and checked against this dataset on first use (thread-safe;
  /// valid while the Dataset is open). Throws ArgumentError for a name not listed (naming
  /// those there are), and, at every call, what opening it threw: DataError for a column
  /// computed from another version of the dataset, ParseError, FatalError.
  const DerivedColumn& derived(std::string_view name) const;
  /// The 2x3 affine of sample i (row-major M, docs/format.md 3).
  std::span<const double, 6> affine(size_t i) const;

  /// Location of sample i's blob of `kind`, checked: shard index valid, range inside it.
  BlobRef blob_ref(size_t i, std::string_view kind = format::kImageBlob) const;
  /// The stored bytes of sample i's blob (no copy, no decoding).
  std::span<const uint8_t> blob(size_t i, std::string_view kind = format::kImageBlob) const;
  std::span<const uint8_t> image(size_t i) const { return blob(i); }
  /// The encoding of sample i's blob: from the `blob_encodings` metadata, and for blobs stored
  /// as source files from their magic bytes (files written before that entry existed: from
  /// the tar member's name).
  BlobEncoding encoding(size_t i, std::string_view kind = format::kImageBlob) const;

  /// Width and height of sample i's image as decode() returns it (EXIF orientation applied),
  /// from its header. Throws DataError when that gives no positive size or over 2^30 pixels.
  std::pair<int, int> decoded_size(size_t i) const;
  /// The channels of sample i's image as stored: 1 for a grey JPEG or PNG (`--channels 1` or
  /// `keep`), else 3; from its header.
  int decoded_channels(size_t i) const;
  /// Decodes sample i's image as stored: RGB, or grey (channels 1), uint8 HWC. Throws
  /// DataError for corrupt bytes.
  Pixels decode(size_t i) const;
  /// Decodes sample i's image into `out` (height*width*channels bytes): RGB for channels 3
  /// (a grey image replicated), grey for channels 1 (a colour image converted with OpenCV's
  /// weights, 0.299 R + 0.587 G + 0.114 B). When the image has another size it is resized
  /// (area/linear) if `resize`, else DataError is thrown.
  void decode_into(size_t i, std::span<uint8_t> out, int width, int height, bool resize,
                   int channels = 3) const;
  /// Decodes a dense map (`kind` e.g. "__depth__") keeping channels and bit depth (a .npy map:
  /// its dtype, any of them, and its channel count; a copy of dense_array()).
  Pixels decode_dense(size_t i, std::string_view kind) const;
  /// Sample i's dense map of a kind stored as .npy, zero-copy: its dtype and shape (H, W) or
  /// (H, W, C), the bytes pointing into the shard's map. Throws ArgumentError for a kind not
  /// stored as .npy, DataError when the blob is no such array or its size is not the blob's
  /// width x height.
  TensorView dense_array(size_t i, std::string_view kind) const;

 private:
  Dataset(const std::string& dir, ShardFetcher fetch, bool lazy);
  struct Tensor;
  const Tensor& tensor(std::string_view name) const;
  const Tensor* find_tensor(std::string_view name) const;
  /// Index into fields_; fields_.size() for __affine__, fields_.size() + 1 when unknown.
  size_t field_index(std::string_view name) const;
  struct BlobState;
  const BlobState& blob_state(std::string_view kind) const;
  template <class T>
  T scalar(const Tensor& t, size_t i) const;
  void check_index(size_t i) const;
  /// Shard k, mapped (on its first use, with a ShardFetcher).
  const MappedFile& shard(size_t k) const;
  std::pair<int64_t, int64_t> ragged_range(const Tensor& offsets, int64_t rows, size_t i,
                                           std::string_view field) const;

  std::string dir_;
  size_t n_ = 0;
  std::unique_ptr<MappedFile> labels_;
  mutable std::vector<MappedFile> shards_;  // mapped at open, or on first use (State::fetch)
  std::vector<std::string> shard_names_;
  std::vector<std::string> blob_kinds_;
  std::vector<FieldSpec> fields_;
  FieldSpec affine_field_;
  std::vector<std::string> derived_names_;
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace tarmac
