#pragma once
// The central directory of a zip file (PKWARE's APPNOTE 6.3: end records, ZIP64 included),
// read from its end through a "read at offset" function (pread for a file, Range GETs for a
// remote object: RangedReadAt), so that the reader thread can hand each member on still
// compressed. Parsed defensively: every size and offset is checked against the file.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
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

/// Bytes [offset, offset + size) of an object by one request (a Range GET); throws when it
/// cannot have them all.
using FetchRange = std::function<std::vector<uint8_t>(uint64_t offset, size_t size)>;

/// The most bytes the end records take from a zip's end (the end record and its longest
/// comment): the first fetch of a RangedReadAt, which holds the central directory of most zips.
constexpr size_t kZipTailSize = 22 + 0xffff;

/// A ReadAt over an object of `size` bytes read by ranges: its last `tail` bytes by one fetch,
/// on the first read, then kept; what lies before them by one fetch per read asking for it (a
/// central directory larger than the tail, a ZIP64 end record further back).
class RangedReadAt {
 public:
  RangedReadAt(FetchRange fetch, uint64_t size, size_t tail = kZipTailSize)
      : fetch_(std::move(fetch)), size_(size), tail_size_(tail) {}
  bool operator()(uint64_t offset, size_t size, uint8_t* out);
  uint32_t fetches() const { return fetches_; }

 private:
  FetchRange fetch_;
  uint64_t size_;
  size_t tail_size_;
  std::vector<uint8_t> tail_;
  uint64_t tail_start_ = 0;
  bool have_tail_ = false;
  uint32_t fetches_ = 0;
};

/// True when `n` bytes at `p` (a file's first) begin a zip local header or an empty zip.
bool starts_zip(const uint8_t* p, size_t n);

/// Where a member's data starts, from the first 30 bytes of its local header; throws ParseError
/// when they are not a local header. The header's name and extra field lengths count: they may
/// differ from the central directory's (a ZIP64 extra field only here, for instance).
uint64_t zip_data_offset(const uint8_t* local_header, uint64_t local_offset);
constexpr size_t kZipLocalHeaderSize = 30;

}  // namespace tarmac
