#pragma once
// A derived column's part record (docs/format.md 8: part-RRRRR-of-WWWWW.json): each rank's
// record of the chunks it wrote, with its one parser. Written by `python -m tarmac.derive`
// (python/tarmac/derive.py, from the layout format.md 8 gives), read by `column merge`, `column
// ls` and verify: defensively, since a user process killed at any point or a hand-made tool may
// have written it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tarmac::format {

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

/// The record `text`, read from `path` (which messages name, and whose file name must be the
/// record's: part_record_name(rank, world)). Throws ParseError naming the file and the field.
PartRecord parse_part_record(std::string_view text, const std::filesystem::path& path);

/// The record in the file at `path` (at most kMaxPartRecordBytes). Throws FatalError when it
/// cannot be read, ParseError as parse_part_record.
PartRecord read_part_record(const std::filesystem::path& path);

/// The records in `parts_dir` (files named part-*-of-*.json), sorted by world then rank.
std::vector<PartRecord> read_part_records(const std::filesystem::path& parts_dir);

/// The largest part record read: a record lists its chunks, a few hundred bytes each.
inline constexpr uintmax_t kMaxPartRecordBytes = 256ull << 20;

}  // namespace tarmac::format
