#include "source/zip_directory.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace tarmac {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kLocator64Sig = 0x07064b50;
constexpr size_t kEndSize = 22, kLocator64Size = 20, kEnd64Size = 56, kCentralSize = 46;
constexpr uint64_t kMaxComment = 0xffff;

uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint64_t le64(const uint8_t* p) {
  return le32(p) | static_cast<uint64_t>(le32(p + 4)) << 32;
}

struct End {
  uint64_t entries = 0, cd_size = 0, cd_offset = 0;
  uint64_t position = 0;  // of the end record that comes first (ZIP64's where there is one)
};

End read_end(const ReadAt& read_at, uint64_t file_size) {
  const uint64_t tail_size = std::min<uint64_t>(file_size, kEndSize + kMaxComment);
  std::vector<uint8_t> tail(tail_size);
  if (tail_size < kEndSize || !read_at(file_size - tail_size, tail.size(), tail.data()))
    throw ParseError("no zip end record: the file is too short");
  // The last end record whose comment reaches no further than the end of the file.
  size_t at = tail_size - kEndSize + 1;
  bool found = false;
  while (at-- > 0)
    if (le32(&tail[at]) == kEndSig && at + kEndSize + le16(&tail[at + 20]) <= tail_size) {
      found = true;
      break;
    }
  if (!found)
    throw ParseError(
        "no zip end record (the central directory's end): the zip is truncated or not a zip");
  const uint8_t* e = &tail[at];
  End end;
  end.position = file_size - tail_size + at;
  if (le16(e + 4) != 0 || le16(e + 6) != 0 || le16(e + 8) != le16(e + 10))
    throw ParseError(
        "a zip split over several files (disks) is not supported; join its parts "
        "first (zip -s 0 split.zip --out whole.zip)");
  end.entries = le16(e + 10);
  end.cd_size = le32(e + 12);
  end.cd_offset = le32(e + 16);
  if (end.position >= kLocator64Size) {
    uint8_t loc[kLocator64Size];
    if (read_at(end.position - kLocator64Size, sizeof loc, loc) && le32(loc) == kLocator64Sig) {
      const uint64_t at64 = le64(loc + 8);
      uint8_t e64[kEnd64Size];
      if (at64 > end.position - kLocator64Size ||
          end.position - kLocator64Size - at64 < kEnd64Size || !read_at(at64, sizeof e64, e64) ||
          le32(e64) != kEnd64Sig)
        throw ParseError("the ZIP64 end record is missing or corrupt");
      if (le32(e64 + 16) != 0 || le32(e64 + 20) != 0 || le64(e64 + 24) != le64(e64 + 32))
        throw ParseError("a zip split over several files (disks) is not supported");
      end.entries = le64(e64 + 32);
      end.cd_size = le64(e64 + 40);
      end.cd_offset = le64(e64 + 48);
      end.position = at64;
    }
  }
  if (end.cd_offset > end.position || end.cd_size > end.position - end.cd_offset)
    throw ParseError("the central directory lies outside the file (offset " +
                     std::to_string(end.cd_offset) + ", " + std::to_string(end.cd_size) +
                     " bytes): the zip is truncated or has data before it");
  if (end.entries > end.cd_size / kCentralSize)
    throw ParseError("the zip end record counts " + std::to_string(end.entries) +
                     " members, more than its central directory holds");
  return end;
}

ZipEntry::Kind kind_of(const ZipEntry& z, uint16_t made_by, uint32_t external) {
  if (!z.name.empty() && z.name.back() == '/') return ZipEntry::Kind::Directory;
  const unsigned host = made_by >> 8;
  if (host == 3 || host == 19) {  // Unix, OS X: st_mode in the high half
    switch ((external >> 16) & 0170000) {
      case 0:
      case 0100000:
        return ZipEntry::Kind::File;
      case 0040000:
        return ZipEntry::Kind::Directory;
      case 0120000:
        return ZipEntry::Kind::Symlink;
      default:
        return ZipEntry::Kind::Other;
    }
  }
  return (external & 0x10) ? ZipEntry::Kind::Directory : ZipEntry::Kind::File;  // MS-DOS bits
}

// The ZIP64 extended information extra field (id 1) holds, in order, each of size, compressed
// size and offset whose 32-bit field is 0xffffffff.
void apply_zip64(ZipEntry& z, const uint8_t* extra, size_t n, bool want_size, bool want_csize,
                 bool want_offset) {
  size_t at = 0;
  while (at + 4 <= n) {
    const uint16_t id = le16(extra + at), len = le16(extra + at + 2);
    if (at + 4 + len > n) break;
    if (id == 1) {
      const uint8_t* p = extra + at + 4;
      size_t left = len;
      auto next = [&](uint64_t& v, const char* what) {
        if (left < 8)
          throw ParseError("member '" + z.name + "': its ZIP64 extra field lacks the " + what);
        v = le64(p);
        p += 8;
        left -= 8;
      };
      if (want_size) next(z.size, "size");
      if (want_csize) next(z.compressed_size, "compressed size");
      if (want_offset) next(z.local_offset, "offset");
      return;
    }
    at += 4 + static_cast<size_t>(len);
  }
  if (want_size || want_csize || want_offset)
    throw ParseError("member '" + z.name +
                     "': its sizes say ZIP64 but it has no ZIP64 extra field");
}

}  // namespace

bool RangedReadAt::operator()(uint64_t offset, size_t size, uint8_t* out) {
  if (offset > size_ || size_ - offset < size) return false;
  if (!have_tail_) {
    tail_start_ = size_ - std::min<uint64_t>(size_, tail_size_);
    tail_ = fetch_(tail_start_, static_cast<size_t>(size_ - tail_start_));
    ++fetches_;
    if (tail_.size() != size_ - tail_start_) return false;
    have_tail_ = true;
  }
  size_t before = 0;  // bytes asked for that lie before the tail
  if (offset < tail_start_ && size > 0) {
    before = static_cast<size_t>(std::min<uint64_t>(size, tail_start_ - offset));
    const std::vector<uint8_t> got = fetch_(offset, before);
    ++fetches_;
    if (got.size() != before) return false;
    std::memcpy(out, got.data(), before);
  }
  if (size > before)
    std::memcpy(out + before, tail_.data() + (offset + before - tail_start_), size - before);
  return true;
}

bool starts_zip(const uint8_t* p, size_t n) {
  return n >= 4 && (le32(p) == kLocalSig || le32(p) == kEndSig);
}

uint64_t zip_data_offset(const uint8_t* h, uint64_t local_offset) {
  if (le32(h) != kLocalSig)
    throw ParseError("no local header at offset " + std::to_string(local_offset) +
                     ", where the central directory says a member starts");
  return local_offset + kZipLocalHeaderSize + le16(h + 26) + le16(h + 28);
}

ZipDirectory read_zip_directory(const ReadAt& read_at, uint64_t file_size) {
  const End end = read_end(read_at, file_size);
  std::vector<uint8_t> cd(static_cast<size_t>(end.cd_size));
  if (!read_at(end.cd_offset, cd.size(), cd.data()))
    throw ParseError("the central directory cannot be read: the zip is truncated");
  ZipDirectory dir;
  dir.directory_offset = end.cd_offset;
  dir.entries.reserve(static_cast<size_t>(end.entries));
  size_t at = 0;
  while (at < cd.size()) {
    if (cd.size() - at < kCentralSize || le32(&cd[at]) != kCentralSig)
      throw ParseError("the central directory is corrupt at its entry " +
                       std::to_string(dir.entries.size() + 1));
    const uint8_t* h = &cd[at];
    const size_t name_len = le16(h + 28), extra_len = le16(h + 30), comment_len = le16(h + 32);
    if (cd.size() - at - kCentralSize < name_len + extra_len + comment_len)
      throw ParseError("the central directory's entry " + std::to_string(dir.entries.size() + 1) +
                       " runs past its end");
    ZipEntry z;
    z.name.assign(reinterpret_cast<const char*>(h + kCentralSize), name_len);
    z.flags = le16(h + 8);
    z.method = le16(h + 10);
    z.crc32 = le32(h + 16);
    z.compressed_size = le32(h + 20);
    z.size = le32(h + 24);
    z.local_offset = le32(h + 42);
    const bool want_csize = z.compressed_size == 0xffffffffu, want_size = z.size == 0xffffffffu,
               want_offset = z.local_offset == 0xffffffffu;
    apply_zip64(z, h + kCentralSize + name_len, extra_len, want_size, want_csize, want_offset);
    z.kind = kind_of(z, le16(h + 4), le32(h + 38));
    if (z.local_offset > end.cd_offset ||
        end.cd_offset - z.local_offset < kZipLocalHeaderSize + z.compressed_size)
      throw ParseError("member '" + z.name + "' lies outside the member data (offset " +
                       std::to_string(z.local_offset) + ", " + std::to_string(z.compressed_size) +
                       " bytes): the zip is corrupt");
    dir.entries.push_back(std::move(z));
    at += kCentralSize + name_len + extra_len + comment_len;
  }
  if (dir.entries.size() != end.entries && end.entries != 0xffff)
    throw ParseError("the zip end record counts " + std::to_string(end.entries) +
                     " members, its central directory holds " + std::to_string(dir.entries.size()));
  // In file order, as libarchive hands them on. Members may not share bytes (a zip bomb's
  // trick): each starts after the previous one's local header and data.
  std::stable_sort(
      dir.entries.begin(), dir.entries.end(),
      [](const ZipEntry& a, const ZipEntry& b) { return a.local_offset < b.local_offset; });
  for (size_t i = 1; i < dir.entries.size(); ++i) {
    const ZipEntry& a = dir.entries[i - 1];
    if (dir.entries[i].local_offset - a.local_offset < kZipLocalHeaderSize + a.compressed_size)
      throw ParseError("members '" + a.name + "' and '" + dir.entries[i].name +
                       "' overlap in the file: the zip is corrupt or crafted");
  }
  return dir;
}

}  // namespace tarmac
