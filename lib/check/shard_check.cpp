#include "check/shard_check.h"

#include <sys/mman.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "common/crc32.h"
#include "common/error.h"
#include "format/npy_blob.h"
#include "transform/image_codec.h"

namespace tarmac::check {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kBlock = 512;

uint64_t padded(uint64_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}

bool all_zero(const uint8_t* p, uint64_t n) {
  return std::all_of(p, p + n, [](uint8_t c) { return c == 0; });
}

// An octal field written as tarmac writes it: width-1 octal digits, then a NUL.
std::optional<uint64_t> octal(const uint8_t* p, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i + 1 < width; ++i) {
    if (p[i] < '0' || p[i] > '7') return std::nullopt;
    v = v * 8 + (p[i] - '0');
  }
  if (p[width - 1] != 0) return std::nullopt;
  return v;
}

std::string field(const uint8_t* p, size_t width) {
  const auto* end = std::find(p, p + width, uint8_t{0});
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(end - p));
}

struct Header {
  char type = 0;
  uint64_t size = 0;
  std::string name;
};

// Parses and checks one 512-byte ustar header; returns why it is bad, or "".
std::string parse_header(const uint8_t* b, Header& h) {
  // Checksum: six octal digits, NUL, space; the byte sum with that field read as spaces.
  uint64_t stored = 0;
  for (int i = 148; i < 154; ++i) {
    if (b[i] < '0' || b[i] > '7') return "checksum field is not octal";
    stored = stored * 8 + (b[i] - '0');
  }
  if (b[154] != 0 || b[155] != ' ') return "checksum field is not terminated by NUL and space";
  uint64_t sum = 8 * ' ';
  for (int i = 0; i < 512; ++i)
    if (i < 148 || i >= 156) sum += b[i];
  if (sum != stored)
    return "checksum mismatch (header says " + std::to_string(stored) + ", bytes sum to " +
           std::to_string(sum) + ")";
  if (std::string_view(reinterpret_cast<const char*>(b + 257), 8) != std::string_view("ustar\0"
                                                                                      "00",
                                                                                      8))
    return "not a POSIX ustar header (magic/version)";
  const auto size = octal(b + 124, 12);
  if (!size) return "size field is not octal";
  h.size = *size;
  h.type = static_cast<char>(b[156]);
  const std::string prefix = field(b + 345, 155);
  h.name = prefix.empty() ? field(b, 100) : prefix + "/" + field(b, 100);
  return "";
}

// Parses pax records "<len> key=value\n" covering `n` bytes; takes path and size.
std::string parse_pax(const uint8_t* p, uint64_t n, std::optional<std::string>& path,
                      std::optional<uint64_t>& size) {
  const std::string_view all(reinterpret_cast<const char*>(p), n);
  size_t at = 0;
  while (at < all.size()) {
    const size_t space = all.find(' ', at);
    if (space == std::string_view::npos || space == at || space - at > 18)
      return "pax record length is malformed";
    uint64_t len = 0;
    for (size_t i = at; i < space; ++i) {
      if (all[i] < '0' || all[i] > '9') return "pax record length is not decimal";
      len = len * 10 + static_cast<uint64_t>(all[i] - '0');
    }
    if (len < space - at + 3 || at + len > all.size() || all[at + len - 1] != '\n')
      return "pax record is malformed";
    const std::string_view rec = all.substr(space + 1, at + len - space - 2);
    const size_t eq = rec.find('=');
    if (eq == std::string_view::npos) return "pax record has no '='";
    const std::string_view key = rec.substr(0, eq), value = rec.substr(eq + 1);
    if (key == "path") path = std::string(value);
    if (key == "size") {
      if (value.empty() || value.size() > 19 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return "pax size is not decimal";
      size = std::stoull(std::string(value));
    }
    at += len;
  }
  return "";
}

// With --decode: "" when blob `e` (member extension `ext`) decodes to the annotation file's
// width and height, else why not (" does not decode: ...", ": decodes to ...").
std::string decode_problem(const Annotation& a, BlobEntry e, const std::string& ext,
                           std::span<const uint8_t> blob) {
  const size_t kinds = a.blob_kinds().size();
  const BlobRef b = a.blob(e % kinds, e / kinds);
  try {
    int w = 0, hgt = 0;
    if (ext == "rgb") {
      if (blob.size() != static_cast<uint64_t>(b.width) * static_cast<uint64_t>(b.height) * 3)
        throw ParseError("raw RGB size " + std::to_string(blob.size()) +
                         " is not width x height x 3");
      w = b.width;
      hgt = b.height;
    } else if (a.layout().blobs[e % kinds].encoding == format::StoredEncoding::Npy) {
      const format::NpyBlob arr = format::parse_npy_blob(blob);
      w = static_cast<int>(arr.shape[1]);
      hgt = static_cast<int>(arr.shape[0]);
    } else {
      const cv::Mat m = e % kinds == 0 ? decode_image(blob, uint64_t{1} << 36)
                                       : decode_dense(blob, uint64_t{1} << 36);
      w = m.cols;
      hgt = m.rows;
    }
    if (w != b.width || hgt != b.height)
      return ": decodes to " + std::to_string(w) + "x" + std::to_string(hgt) +
             " but the annotation file says " + std::to_string(b.width) + "x" +
             std::to_string(b.height);
  } catch (const FatalError&) {
    throw;  // not the data's fault (a codec plugin that cannot be loaded)
  } catch (const std::exception& ex) {
    return std::string(" does not decode: ") + ex.what();
  }
  return "";
}

// The extension of tar member `member` of blob `e` when it is named KEY.EXT as it must be
// (a dense map's: KEY.NAME.EXT), else "".
std::string member_ext(const Annotation& a, BlobEntry e, const std::string& member) {
  const size_t kinds = a.blob_kinds().size();
  const std::string key = a.key(e / kinds), what = a.blob_kinds()[e % kinds];
  const std::string ext =
      member.size() > key.size() + 1 && member.compare(0, key.size() + 1, key + ".") == 0
          ? member.substr(key.size() + 1)
          : "";
  const std::string dense = what.size() > 4 ? what.substr(2, what.size() - 4) + "." : "";
  const bool ok =
      !ext.empty() && ext.find('/') == std::string::npos &&
      (e % kinds == 0 || (ext.size() > dense.size() && ext.compare(0, dense.size(), dense) == 0));
  return ok ? ext : "";
}

// One walk of a shard's tar structure against the blobs the annotation file places in it:
// every header parsed, every member matched to its blob (size, name, CRC-32, optionally its
// decode), the file's CRC-32 taken on the way, each problem recorded.
class ShardWalk {
 public:
  ShardWalk(const Annotation& a, std::string name, const std::vector<BlobEntry>& entries,
            bool decode, std::span<const uint8_t> bytes, ShardCheck& r)
      : a_(a),
        name_(std::move(name)),
        kinds_(a.blob_kinds().size()),
        entries_(entries),
        decode_(decode),
        bytes_(bytes),
        size_(bytes.size()),
        r_(r) {}

  /// Walks the whole file, adding the bytes read to `progress`.
  void run(std::atomic<uint64_t>& progress, const StopRequest* stop) {
    while (true) {
      throw_if_stopped(stop);  // per member: a shard of large images decoded takes seconds
      if (pos_ + kBlock > size_) {
        problem("", "truncated: the file ends at byte " + std::to_string(size_) +
                        " without the tar end-of-archive blocks");
        break;
      }
      const uint8_t* block = bytes_.data() + pos_;
      if (all_zero(block, kBlock)) {
        check_end(block);
        break;
      }
      Header h;
      std::optional<std::string> pax_path;
      std::optional<uint64_t> pax_size;
      const std::optional<std::string> err = read_header(block, h, pax_path, pax_size);
      if (!err) break;  // truncated inside a pax header: said
      if (!err->empty()) {
        problem("", "tar header at byte " + std::to_string(pos_) + ": " + *err);
        if (!resync()) break;
        continue;
      }
      if (!check_member(h, pax_path.value_or(h.name), pax_size.value_or(h.size))) break;
      progress.fetch_add(pos_ - reported_, std::memory_order_relaxed);
      reported_ = pos_;
    }
    for (; j_ < entries_.size(); ++j_)
      problem(entry_key(entries_[j_]), entry_what(entries_[j_]) + " at byte " +
                                           std::to_string(entry_blob(entries_[j_]).offset) +
                                           " is not the data of any tar member of the shard");
    feed(size_);
    progress.fetch_add(size_ > reported_ ? size_ - reported_ : 0, std::memory_order_relaxed);
    r_.crc32 = crc_;
  }

 private:
  void problem(const std::string& sample, const std::string& what) {
    r_.problems.push_back({name_, sample, what});
  }
  std::string entry_key(BlobEntry e) const { return a_.key(e / kinds_); }
  std::string entry_what(BlobEntry e) const { return a_.blob_kinds()[e % kinds_]; }
  BlobRef entry_blob(BlobEntry e) const { return a_.blob(e % kinds_, e / kinds_); }

  // The file's CRC-32 taken up to `upto`.
  void feed(uint64_t upto) {
    if (upto > cursor_) crc_ = crc32_update(crc_, bytes_.data() + cursor_, upto - cursor_);
    cursor_ = std::max(cursor_, upto);
  }

  // After a damaged header: jump to the header of the next blob the annotation file places
  // beyond it; the blobs in between are reported. False when there is none.
  bool resync() {
    while (j_ < entries_.size() &&
           static_cast<uint64_t>(entry_blob(entries_[j_]).offset) <= pos_ + kBlock) {
      problem(entry_key(entries_[j_]), entry_what(entries_[j_]) + ": its tar header is damaged");
      ++j_;
    }
    if (j_ == entries_.size()) return false;
    pos_ = static_cast<uint64_t>(entry_blob(entries_[j_]).offset) - kBlock;
    return true;
  }

  // The end-of-archive blocks, the first of which is at `block`.
  void check_end(const uint8_t* block) {
    if (pos_ + 2 * kBlock > size_)
      problem("", "truncated: the second end-of-archive block is missing");
    else if (!all_zero(block + kBlock, kBlock))
      problem("", "the second end-of-archive block at byte " + std::to_string(pos_ + kBlock) +
                      " is not zero");
    else if (pos_ + 2 * kBlock != size_)
      problem("", std::to_string(size_ - pos_ - 2 * kBlock) +
                      " byte(s) follow the end-of-archive blocks");
  }

  // The member's header at `block` (after a pax header, the one it describes: pos_ then points
  // there): "" when it parses, else what is wrong; nullopt when the file ends inside a pax
  // header (said).
  std::optional<std::string> read_header(const uint8_t* block, Header& h,
                                         std::optional<std::string>& pax_path,
                                         std::optional<uint64_t>& pax_size) {
    std::string err = parse_header(block, h);
    if (!err.empty() || h.type != 'x') return err;
    const uint64_t data = pos_ + kBlock;
    if (data + h.size > size_) {
      problem("", "truncated inside the pax header at byte " + std::to_string(pos_));
      return std::nullopt;
    }
    err = parse_pax(bytes_.data() + data, h.size, pax_path, pax_size);
    if (err.empty() &&
        !all_zero(bytes_.data() + data + h.size, std::min(padded(h.size), size_ - data) - h.size))
      err = "padding after the pax records is not zero";
    pos_ = data + padded(h.size);
    if (err.empty() && pos_ + kBlock > size_) err = "truncated after a pax header";
    if (err.empty()) err = parse_header(bytes_.data() + pos_, h);
    if (err.empty() && h.type == 'x') err = "two pax headers in a row";
    return err;
  }

  // The member whose header is at pos_, against the blob the annotation file places at its
  // data; pos_ then moves past it. False when the file ends inside it (said).
  bool check_member(const Header& h, const std::string& member, uint64_t msize) {
    const uint64_t data = pos_ + kBlock;
    if (data + msize > size_ || data + padded(msize) > size_) {
      problem("", "truncated: member '" + member + "' needs bytes up to " +
                      std::to_string(data + padded(msize)) + " but the file has " +
                      std::to_string(size_));
      return false;
    }
    if (h.type != '0')
      problem("", "member '" + member + "' at byte " + std::to_string(pos_) +
                      " is not a regular file (type '" + std::string(1, h.type) + "')");
    while (j_ < entries_.size() && static_cast<uint64_t>(entry_blob(entries_[j_]).offset) < data) {
      problem(entry_key(entries_[j_]), entry_what(entries_[j_]) + " at byte " +
                                           std::to_string(entry_blob(entries_[j_]).offset) +
                                           " is not the start of a tar member's data");
      ++j_;
    }
    if (j_ < entries_.size() && static_cast<uint64_t>(entry_blob(entries_[j_]).offset) == data)
      check_blob_at(entries_[j_++], member, data, msize);
    else
      problem("", "member '" + member + "' at byte " + std::to_string(pos_) +
                      " is not referenced by the annotation file");
    if (!all_zero(bytes_.data() + data + msize, padded(msize) - msize))
      problem("", "padding after member '" + member + "' is not zero");
    pos_ = data + padded(msize);
    return true;
  }

  // Blob `e`, stored as tar member `member` of `msize` bytes at `data`.
  void check_blob_at(BlobEntry e, const std::string& member, uint64_t data, uint64_t msize) {
    const std::string key = entry_key(e), what = entry_what(e);
    const BlobRef b = entry_blob(e);
    if (static_cast<uint64_t>(b.size) != msize)
      problem(key, what + ": size is " + std::to_string(b.size) + " but tar member '" + member +
                       "' holds " + std::to_string(msize));
    const std::string ext = member_ext(a_, e, member);
    const bool ext_ok = !ext.empty();
    if (!ext_ok)
      problem(key, what + ": tar member is named '" + member + "', not '" + key + ".EXT'");
    feed(data);
    const uint8_t* p = bytes_.data() + data;
    const uint32_t c = crc32_update(0, p, msize);
    crc_ = static_cast<uint32_t>(::crc32_combine(crc_, c, static_cast<z_off_t>(msize)));
    cursor_ = data + msize;
    if (c != b.crc32) {
      char buf[96];
      std::snprintf(buf, sizeof buf,
                    ": CRC-32 of the stored bytes is %08x, the annotation file says %08x",
                    static_cast<unsigned>(c), b.crc32);
      problem(key, what + buf);
    }
    if (decode_ && ext_ok)
      if (std::string why = decode_problem(a_, e, ext, {p, msize}); !why.empty())
        problem(key, what + why);
    r_.blob_bytes += msize;
  }

  const Annotation& a_;
  const std::string name_;
  const size_t kinds_;
  const std::vector<BlobEntry>& entries_;
  const bool decode_;
  const std::span<const uint8_t> bytes_;
  const uint64_t size_;
  ShardCheck& r_;
  uint32_t crc_ = 0;
  uint64_t cursor_ = 0;  // bytes [0, cursor_) are in crc_
  size_t j_ = 0;         // next expected blob
  uint64_t pos_ = 0;     // next header
  uint64_t reported_ = 0;
};

}  // namespace

ShardCheck check_shard(const Annotation& a, uint32_t shard, const std::vector<BlobEntry>& entries,
                       bool decode, std::atomic<uint64_t>& progress, const StopRequest* stop) {
  ShardCheck r;
  const std::string name = a.shards().at(shard);
  MappedFile file;
  try {
    file = MappedFile((fs::path(a.dir()) / name).string());
  } catch (const FatalError& e) {
    r.problems.push_back({name, "",
                          std::string("shard cannot be read: ") + e.what() + " (" +
                              std::to_string(entries.size()) + " blob(s) stored in it are lost)"});
    return r;
  }
  const auto bytes = file.bytes();
  r.size = bytes.size();
  if (r.size > 0) ::madvise(const_cast<uint8_t*>(bytes.data()), r.size, MADV_SEQUENTIAL);
  ShardWalk(a, name, entries, decode, bytes, r).run(progress, stop);
  r.walked = true;
  return r;
}

std::vector<Problem> check_blob(const Annotation& a, uint32_t shard, BlobEntry e,
                                std::span<const uint8_t> bytes, bool decode) {
  std::vector<Problem> out;
  const size_t kinds = a.blob_kinds().size();
  const std::string key = a.key(e / kinds), what = a.blob_kinds()[e % kinds];
  const BlobRef b = a.blob(e % kinds, e / kinds);
  auto problem = [&](const std::string& why) { out.push_back({a.shards().at(shard), key, why}); };
  if (b.offset < static_cast<int64_t>(kBlock) || b.size < 0 ||
      bytes.size() != kBlock + static_cast<uint64_t>(b.size)) {
    problem(what + " at byte " + std::to_string(b.offset) +
            " is not the data of a tar member (no header before it)");
    return out;
  }
  Header h;
  if (std::string err = parse_header(bytes.data(), h); !err.empty()) {
    problem(what + ": the tar header before it: " + err);
    return out;
  }
  if (h.type != '0') problem(what + ": its tar member is not a regular file");
  if (h.size != static_cast<uint64_t>(b.size))
    problem(what + ": size is " + std::to_string(b.size) + " but its tar member holds " +
            std::to_string(h.size));
  // A name longer than the ustar fields is in a pax record before this header: not read here.
  std::string ext = member_ext(a, e, h.name);
  if (ext.empty() && h.name.size() < 99)
    problem(what + ": tar member is named '" + h.name + "', not '" + key + ".EXT'");
  const auto data = bytes.subspan(kBlock);
  const uint32_t c = crc32_update(0, data.data(), data.size());
  if (c != b.crc32) {
    char buf[96];
    std::snprintf(buf, sizeof buf,
                  ": CRC-32 of the stored bytes is %08x, the annotation file says %08x",
                  static_cast<unsigned>(c), b.crc32);
    problem(what + buf);
  }
  if (decode && !ext.empty())
    if (std::string why = decode_problem(a, e, ext, data); !why.empty()) problem(what + why);
  return out;
}

}  // namespace tarmac::check
