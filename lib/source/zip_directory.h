#pragma once
// The central directory of a zip file (PKWARE's APPNOTE 6.3: end records, ZIP64 included),
// read with a few preads from its end, so that the reader thread can hand each member on
// still compressed. Parsed defensively: every size and offset is checked against the file.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tarmac {

struct ZipEntry {
  std::string name;              ///< as stored (not normalised, maybe not UTF-8)
  uint64_t local_offset = 0;     ///< of its local header, from the start of the file
  uint64_t compressed_size = 0;  ///< of its data as stored
  uint64_t size = 0;             ///< inflated
  uint32_t crc32 = 0;
  uint16_t method = 0;  ///< 0 stored, 8 deflate, ...
  uint16_t flags = 0;   ///< bit 0: encrypted
  enum class Kind : uint8_t { File, Directory, Symlink, Other } kind = Kind::File;
};

struct ZipDirectory {
  std::vector<ZipEntry> entries;  ///< in the order of their local headers in the file
  uint64_t directory_offset = 0;  ///< where the central directory starts: member data ends here
};

/// Reads `size` bytes at `offset` into `out`; false when the file has fewer.
using ReadAt = std::function<bool(uint64_t offset, size_t size, uint8_t* out)>;

/// The central directory of a zip file of `file_size` bytes. Throws ParseError saying what is
/// wrong (no end record, offsets outside the file, overlapping members...).
ZipDirectory read_zip_directory(const ReadAt& read_at, uint64_t file_size);

/// True when `n` bytes at `p` (a file's first) begin a zip local header or an empty zip.
bool starts_zip(const uint8_t* p, size_t n);

/// Where a member's data starts, from the first 30 bytes of its local header; throws ParseError
/// when they are not a local header. The header's name and extra field lengths count: they may
/// differ from the central directory's (a ZIP64 extra field only here, for instance).
uint64_t zip_data_offset(const uint8_t* local_header, uint64_t local_offset);
constexpr size_t kZipLocalHeaderSize = 30;

}  // namespace tarmac
