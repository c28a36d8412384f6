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

}  // namespace

ShardCheck check_shard(const Annotation& a, uint32_t shard, const std::vector<BlobEntry>& entries,
                       bool decode, std::atomic<uint64_t>& progress, const StopRequest* stop) {
  ShardCheck r;
  const std::string name = a.shards().at(shard);
  const size_t kinds = a.blob_kinds().size();
  auto problem = [&](const std::string& sample, const std::string& what) {
    r.problems.push_back({name, sample, what});
  };
  auto entry_key = [&](BlobEntry e) { return a.key(e / kinds); };
  auto entry_what = [&](BlobEntry e) { return a.blob_kinds()[e % kinds]; };
  auto entry_blob = [&](BlobEntry e) { return a.blob(e % kinds, e / kinds); };

  MappedFile file;
  try {
    file = MappedFile((fs::path(a.dir()) / name).string());
  } catch (const FatalError& e) {
    problem("", std::string("shard cannot be read: ") + e.what() + " (" +
                    std::to_string(entries.size()) + " blob(s) stored in it are lost)");
    return r;
  }
  const auto bytes = file.bytes();
  const uint64_t size = bytes.size();
  r.size = size;
  if (size > 0) ::madvise(const_cast<uint8_t*>(bytes.data()), size, MADV_SEQUENTIAL);

  uint32_t crc = 0;
  uint64_t cursor = 0;  // bytes [0, cursor) are in `crc`
  auto feed = [&](uint64_t upto) {
    if (upto > cursor) crc = crc32_update(crc, bytes.data() + cursor, upto - cursor);
    cursor = std::max(cursor, upto);
  };
  size_t j = 0;      // next expected blob
  uint64_t pos = 0;  // next header
  uint64_t reported = 0;
  // After a damaged header: jump to the header of the next blob the annotation file places
  // beyond it; the blobs in between are reported. False when there is none.
  auto resync = [&]() {
    while (j < entries.size() &&
           static_cast<uint64_t>(entry_blob(entries[j]).offset) <= pos + kBlock) {
      problem(entry_key(entries[j]), entry_what(entries[j]) + ": its tar header is damaged");
      ++j;
    }
    if (j == entries.size()) return false;
    pos = static_cast<uint64_t>(entry_blob(entries[j]).offset) - kBlock;
    return true;
  };

  while (true) {
    throw_if_stopped(stop);  // per member: a shard of large images decoded takes seconds
    if (pos + kBlock > size) {
      problem("", "truncated: the file ends at byte " + std::to_string(size) +
                      " without the tar end-of-archive blocks");
      break;
    }
    const uint8_t* block = bytes.data() + pos;
    if (all_zero(block, kBlock)) {
      if (pos + 2 * kBlock > size)
        problem("", "truncated: the second end-of-archive block is missing");
      else if (!all_zero(block + kBlock, kBlock))
        problem("", "the second end-of-archive block at byte " + std::to_string(pos + kBlock) +
                        " is not zero");
      else if (pos + 2 * kBlock != size)
        problem("", std::to_string(size - pos - 2 * kBlock) +
                        " byte(s) follow the end-of-archive blocks");
      break;
    }
    Header h;
    std::string err = parse_header(block, h);
    std::optional<std::string> pax_path;
    std::optional<uint64_t> pax_size;
    if (err.empty() && h.type == 'x') {
      const uint64_t data = pos + kBlock;
      if (data + h.size > size) {
        problem("", "truncated inside the pax header at byte " + std::to_string(pos));
        break;
      }
      err = parse_pax(bytes.data() + data, h.size, pax_path, pax_size);
      if (err.empty() &&
          !all_zero(bytes.data() + data + h.size, std::min(padded(h.size), size - data) - h.size))
        err = "padding after the pax records is not zero";
      pos = data + padded(h.size);
      if (err.empty() && pos + kBlock > size) err = "truncated after a pax header";
      if (err.empty()) err = parse_header(bytes.data() + pos, h);
      if (err.empty() && h.type == 'x') err = "two pax headers in a row";
    }
    if (!err.empty()) {
      problem("", "tar header at byte " + std::to_string(pos) + ": " + err);
      if (!resync()) break;
      continue;
    }
    const std::string member = pax_path.value_or(h.name);
    const uint64_t msize = pax_size.value_or(h.size);
    const uint64_t data = pos + kBlock;
    if (data + msize > size || data + padded(msize) > size) {
      problem("", "truncated: member '" + member + "' needs bytes up to " +
                      std::to_string(data + padded(msize)) + " but the file has " +
                      std::to_string(size));
      break;
    }
    if (h.type != '0')
      problem("", "member '" + member + "' at byte " + std::to_string(pos) +
                      " is not a regular file (type '" + std::string(1, h.type) + "')");
    while (j < entries.size() && static_cast<uint64_t>(entry_blob(entries[j]).offset) < data) {
      problem(entry_key(entries[j]), entry_what(entries[j]) + " at byte " +
                                         std::to_string(entry_blob(entries[j]).offset) +
                                         " is not the start of a tar member's data");
      ++j;
    }
    if (j < entries.size() && static_cast<uint64_t>(entry_blob(entries[j]).offset) == data) {
      const BlobEntry e = entries[j++];
      const std::string key = entry_key(e), what = entry_what(e);
      const BlobRef b = entry_blob(e);
      if (static_cast<uint64_t>(b.size) != msize)
        problem(key, what + ": size is " + std::to_string(b.size) + " but tar member '" + member +
                         "' holds " + std::to_string(msize));
      const std::string ext = member_ext(a, e, member);
      const bool ext_ok = !ext.empty();
      if (!ext_ok)
        problem(key, what + ": tar member is named '" + member + "', not '" + key + ".EXT'");
      feed(data);
      const uint8_t* p = bytes.data() + data;
      const uint32_t c = crc32_update(0, p, msize);
      crc = static_cast<uint32_t>(::crc32_combine(crc, c, static_cast<z_off_t>(msize)));
      cursor = data + msize;
      if (c != b.crc32) {
        char buf[96];
        std::snprintf(buf, sizeof buf,
                      ": CRC-32 of the stored bytes is %08x, the annotation file says %08x",
                      static_cast<unsigned>(c), b.crc32);
        problem(key, what + buf);
      }
      if (decode && ext_ok)
        if (std::string why = decode_problem(a, e, ext, {p, msize}); !why.empty())
          problem(key, what + why);
      r.blob_bytes += msize;
    } else {
      problem("", "member '" + member + "' at byte " + std::to_string(pos) +
                      " is not referenced by the annotation file");
    }
    if (!all_zero(bytes.data() + data + msize, padded(msize) - msize))
      problem("", "padding after member '" + member + "' is not zero");
    pos = data + padded(msize);
    progress.fetch_add(pos - reported, std::memory_order_relaxed);
    reported = pos;
  }
  for (; j < entries.size(); ++j)
    problem(entry_key(entries[j]), entry_what(entries[j]) + " at byte " +
                                       std::to_string(entry_blob(entries[j]).offset) +
                                       " is not the data of any tar member of the shard");
  feed(size);
  progress.fetch_add(size > reported ? size - reported : 0, std::memory_order_relaxed);
  r.crc32 = static_cast<uint32_t>(crc);
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
