#pragma once
// Derived columns (docs/format.md 8 and 9): one output per sample computed from a dataset by
// `python -m tarmac.derive` (VAE latents, embeddings), written by each rank as a part and joined
// by `tarmac column merge` into DIR/columns/NAME.safetensors. The names, the per-rank share and
// the merged file's layout, written once: merge, verify, info and the reader take them from here.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/safetensors.h"

namespace tarmac::format {

/// DIR/columns/: merged columns (NAME.safetensors) and parts (NAME.parts/).
inline constexpr const char* kColumnsDir = "columns";
inline constexpr std::string_view kColumnFormat = "tarmac-column/1";
inline constexpr std::string_view kPartFormat = "tarmac-column-part/1";
inline constexpr std::string_view kChunkFormat = "tarmac-column-chunk/1";

/// A column name (format.md 8): the whole name is 1-128 of [A-Za-z0-9_.-], its first a letter
/// or digit (names starting with "__" are the format's own). python/tarmac/derive.py holds the
/// same rule.
bool is_valid_column_name(std::string_view name);

/// "columns/NAME.safetensors", "columns/NAME.parts", relative to the dataset directory.
std::string column_file(std::string_view name);
std::string column_parts_dir(std::string_view name);
/// "columns/.NAME.safetensors.partial": where `column merge` writes before it renames.
std::string column_partial_file(std::string_view name);

/// What a file name in columns/ is: a merged column's file, its parts' directory, a merge's
/// unfinished file, or none of these (a name that is no valid column name is none).
enum class ColumnEntry { None, Merged, Parts, Partial };
/// The kind of columns/ entry `file_name` is, and (Merged, Parts) the column's name.
ColumnEntry column_entry(std::string_view file_name, std::string* name = nullptr);
/// "part-00003-of-00008.json", the record of rank 3 of 8.
std::string part_record_name(uint64_t rank, uint64_t world);

/// The samples [begin, end) rank `rank` of `world` computes: begin = rank * n / world.
struct SampleRange {
  uint64_t begin = 0, end = 0;
};
SampleRange rank_share(uint64_t n, uint64_t rank, uint64_t world);

/// The tensors of a merged column file: every sample's output flattened and concatenated
/// (`values`: [N, ...] when all outputs share one shape, else [E] flat), element offsets
/// (`offsets` I64 [N + 1]) and per-sample shapes (`shapes` I64 [N, D]).
inline constexpr const char* kColumnValues = "values";
inline constexpr const char* kColumnOffsets = "offsets";
inline constexpr const char* kColumnShapes = "shapes";
/// Optional (format.md 9): `digest` U8 [N, 16], each sample's input digest (what derive's
/// --reuse matches on); a chunk holds `digest` U8 [k, 16] beside its index (format.md 8).
inline constexpr const char* kColumnDigest = "digest";
inline constexpr int64_t kDigestBytes = 16;

/// What the merged file's metadata and header say, checked in constant time.
struct ColumnLayout {
  std::string name;
  uint64_t num_samples = 0;
  DType dtype = DType::U8;
  size_t ndim = 0;  ///< D: dimensions of one sample's output
  /// The common per-sample shape when `values` is [N, ...] (every output has it).
  std::optional<std::vector<int64_t>> uniform_shape;
  const TensorInfo* values = nullptr;
  const TensorInfo* offsets = nullptr;
  const TensorInfo* shapes = nullptr;
  const TensorInfo* digest = nullptr;  ///< U8 [N, 16], or null in a column without digests
  std::string labels_crc32;  ///< the dataset it was computed from: its annotation file's CRC-32
  uint64_t world = 0;        ///< how many ranks computed it
  std::string fn;            ///< the function that computed it (MODULE:FUNC)
  std::string tool;          ///< the derive that computed it ("tarmac 0.1.0 (python)")
  std::string values_crc32, offsets_crc32, shapes_crc32;  ///< 8 lowercase hex digits each
  std::string digest_crc32;                               ///< of `digest`'s bytes; empty without it
};

/// Reads and checks the layout of a merged column file; throws ParseError with the reason.
ColumnLayout read_column_layout(const SafetensorsHeader& header);

/// True for 8 lowercase hexadecimal digits (how CRC-32s are written in JSON and metadata).
bool is_crc32_hex(std::string_view s);

}  // namespace tarmac::format
