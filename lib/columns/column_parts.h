#pragma once
// The parts of a derived column (docs/format.md 8): each rank's record (part-R-of-W.json) and
// the chunks it lists, read defensively: they are written by user processes that may have
// been killed at any point, and by hand-made tools.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tarmac {

struct PartChunk {
  std::string file;  ///< a plain file name in the parts directory
  uint64_t samples = 0;
  uint64_t bytes = 0;
  std::string crc32;  ///< 8 lowercase hex digits: the CRC-32 of the whole chunk file
};

/// One rank's record.
struct PartRecord {
  std::filesystem::path path;
  std::string column;
  uint64_t rank = 0, world = 0, begin = 0, end = 0;
  std::string labels_crc32;  ///< of the dataset it was computed from
  uint64_t num_samples = 0;  ///< of the dataset it was computed from
  std::string fn, tool;
  std::string fn_version;  ///< derive's --fn-version ("" when not given, or an older record)
  std::string digest;      ///< the input digest's scheme its chunks hold ("" for none)
  uint64_t reused = 0;     ///< samples whose output was taken from an older column (--reuse)
  std::vector<PartChunk> chunks;
  uint64_t done = 0;  ///< samples in its chunks
  bool complete = false;
};

/// Reads one record; throws ParseError naming the file and the field.
PartRecord read_part_record(const std::filesystem::path& path);

/// The records in `parts_dir` (files named part-*-of-*.json), sorted by world then rank.
std::vector<PartRecord> read_part_records(const std::filesystem::path& parts_dir);

/// What the dataset in `dir` is, for binding columns to it.
struct DatasetIdentity {
  uint64_t num_samples = 0;
  std::string labels_crc32;  ///< computed from the annotation file's bytes
  std::vector<std::string> field_names;
};
/// Reads the annotation file's header and checksums it; throws FatalError/ParseError.
DatasetIdentity dataset_identity(const std::filesystem::path& dir);

/// "12..40, 77..77 and 3 more ranges": the runs of `indices` (sorted, unique), inclusive.
std::string ranges_text(const std::vector<uint64_t>& indices, size_t most = 4);

}  // namespace tarmac
