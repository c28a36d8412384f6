// InputReader's reader of zip files and remote zip objects: the central directory first (preads,
// or Range GETs of the object's end), then one pass over the bytes that hands each member on as
// stored, for the workers to inflate and check (packed_member.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "remote/http.h"
#include "remote/url.h"
#include "source/input_reader_internal.h"
#include "source/zip_directory.h"

namespace tarmac {
using detail::bad_name_notice;
using detail::normalise;
using detail::read_raw;

namespace {

// Bytes [offset, offset + size) of the remote object `t` of `object_size` bytes by one Range GET,
// for its zip directory; its ETag must be the one the stream reads (`etag`), so that the
// directory and the members come from one version of the object. RemoteError with
// http_status() 200 when the server serves no ranges (the object is then read as a stream).
std::vector<uint8_t> fetch_range(const remote::Target& t, const remote::RemoteConfig& config,
                                 const StopRequest* stop, uint64_t offset, size_t size,
                                 uint64_t object_size, const std::string& etag, uint32_t& retries) {
  if (size == 0) return {};
  const remote::Response r =
      remote::request(t, config, false, "", size + 1,
                      std::to_string(offset) + "-" + std::to_string(offset + size - 1), stop);
  retries += r.retries;
  const bool whole = offset == 0 && size == object_size;  // HTTP 200 answers that one too
  if (r.status == 200 && !whole)
    throw remote::RemoteError("cannot read '" + t.name + "': the server serves no ranges", 200);
  if (r.body.size() != size)
    throw remote::RemoteError("cannot read '" + t.name + "': asked for " + std::to_string(size) +
                              " byte(s) at " + std::to_string(offset) + " of its " +
                              std::to_string(object_size) + ", the server answered " +
                              std::to_string(r.body.size()) +
                              ": the object changed while it was read; run again");
  if (!etag.empty() && !r.etag.empty() && r.etag != etag)
    throw remote::RemoteError("cannot read '" + t.name + "': the object changed while it was read" +
                              " (its ETag was " + etag + ", now " + r.etag + "): run again");
  return {r.body.begin(), r.body.end()};
}

// Reads a file front to back in blocks, checksumming and counting every byte (as read_raw does
// for libarchive), and hands out the ranges asked for, in increasing order.
class SequentialReader {
 public:
  // `buffered`: bytes of the input's start already in src.buffer (read and counted).
  SequentialReader(FdSource& src, size_t buffered) : src_(src), have_(buffered) {}
  uint64_t position() const { return pos_; }
  // Reads up to `offset` (not before the current position), then `size` bytes into `out`.
  void read(uint64_t offset, size_t size, uint8_t* out) {
    if (offset < pos_)
      throw ParseError(
          "a member's local header lies inside the member before it: the zip is "
          "corrupt or crafted");
    skip_to(offset);
    while (size > 0) {
      if (have_ == used_) fill();
      const size_t n = std::min(size, have_ - used_);
      std::memcpy(out, src_.buffer.data() + used_, n);
      used_ += n;
      pos_ += n;
      out += n;
      size -= n;
    }
  }
  void skip_to(uint64_t offset) {
    while (pos_ < offset) {
      if (have_ == used_) fill();
      const size_t n = static_cast<size_t>(std::min<uint64_t>(offset - pos_, have_ - used_));
      used_ += n;
      pos_ += n;
    }
  }
  void to_end() {
    while (true) {
      pos_ += have_ - used_;
      used_ = have_;
      const ssize_t n = read_raw(&src_);
      if (n < 0) throw ParseError("read error: " + src_.read_error);
      if (n == 0) return;
      have_ = static_cast<size_t>(n);
      used_ = 0;
    }
  }

 private:
  void fill() {
    const ssize_t n = read_raw(&src_);
    if (n < 0) throw ParseError("read error: " + src_.read_error);
    if (n == 0) throw ParseError("the file ended early (it shrank while being read)");
    have_ = static_cast<size_t>(n);
    used_ = 0;
  }
  FdSource& src_;
  uint64_t pos_ = 0;
  size_t have_, used_ = 0;
};

}  // namespace

// A zip of `size` bytes: the central directory first (read through `read_at` from the end: preads,
// or Range GETs), then one pass over the input's bytes (src, whose first `buffered` bytes are in
// src.buffer already) that checksums every byte and hands each member on as stored. False, with
// nothing handed on, when some member is compressed otherwise than stored or deflated (bzip2,
// LZMA, zstd...) or a remote server serves no ranges: libarchive reads that zip instead.
bool InputReader::read_zip(uint32_t index, const InputCallbacks& cb, FdSource& src,
                           const std::string& where, const ReadAt& read_at, uint64_t size,
                           size_t buffered) {
  InputInfo& info = inputs_[index];
  auto fail = [&](const std::string& what) {
    if (src.changed) refuse_changed(index);
    // the network's one line (it names the URL) says more than a read error in a zip
    const std::string msg = src.remote_failed ? src.read_error : where + ": " + what;
    if (!options_.skip_errors) throw FatalError(msg);
    info.error = msg;
  };
  ZipDirectory dir;
  try {
    dir = read_zip_directory(read_at, size);
  } catch (const ParseError& e) {
    fail(std::string("zip is corrupt: ") + e.what());
    return true;
  } catch (const remote::RemoteError& e) {
    if (e.http_status() == 200) return false;  // no ranges: nothing read past the first bytes
    if (!options_.skip_errors) throw;
    info.error = e.what();
    return true;
  }
  for (const auto& z : dir.entries)
    if (!(z.flags & 1) && z.method != 0 && z.method != 8) return false;

  SequentialReader file(src, buffered);
  uint8_t local[kZipLocalHeaderSize];
  try {
    for (const auto& z : dir.entries) {
      std::string name = normalise(z.name);
      ++info.members;
      if (z.kind == ZipEntry::Kind::Directory) continue;
      if (!is_valid_utf8(name)) {
        cb.on_notice(bad_name_notice(index, name));
        continue;
      }
      if (z.kind != ZipEntry::Kind::File) {
        const bool link = z.kind == ZipEntry::Kind::Symlink;
        cb.on_notice({index, name, link ? "symbolic link, not followed" : "not a regular file",
                      false, link ? ErrorCode::Link : ErrorCode::NotRegularFile});
        continue;
      }
      if (!admit(index, cb, name, z.size, true)) continue;
      Member m;
      m.name = std::move(name);
      m.size = z.size;
      m.crc32 = z.crc32;
      if (names_only_) {
        cb.on_member(index, std::move(m));
        continue;
      }
      if (z.flags & 1) {
        m.packing = Packing::ZipRefused;
        m.refused =
            "zip member is encrypted; tarmac reads no encrypted members: extract the archive "
            "with its password and convert the files";
      } else if ((z.method == 0 && z.compressed_size != z.size) ||
                 z.compressed_size > z.size + z.size / 8 + 1024) {
        // Deflate never needs that much more than the data (at most 9 bits a byte): the sizes
        // are wrong, and reading the stored bytes would hold more memory than declared.
        m.packing = Packing::ZipRefused;
        m.refused = "zip member declares " + std::to_string(z.size) + " bytes stored in " +
                    std::to_string(z.compressed_size) +
                    (z.method == 0 ? " without compression" : " of deflate data") +
                    ": its central directory is corrupt";
      } else {
        file.read(z.local_offset, sizeof local, local);
        const uint64_t data = zip_data_offset(local, z.local_offset);
        if (data < file.position() || data > dir.directory_offset ||
            dir.directory_offset - data < z.compressed_size)
          throw ParseError("member '" + m.name + "' runs into the central directory");
        m.packing = z.method == 0 ? Packing::ZipStored : Packing::ZipDeflated;
        m.data.resize(static_cast<size_t>(z.compressed_size));
        file.read(data, m.data.size(), m.data.data());
      }
      cb.on_member(index, std::move(m));
    }
    if (!names_only_) file.to_end();
  } catch (const ParseError& e) {
    fail(std::string("zip is corrupt: ") + e.what());
  }
  return true;
}

// A remote zip (its first bytes in src.buffer, src.peeked): the central directory by Range GETs
// of the object's end (RangedReadAt: one for the last 64 KiB, one more for what lies before
// them), the members from the stream it is read through front to back, as a file's are.
// False, with nothing handed on, as read_zip() says, or when the object's size is unknown.
bool InputReader::read_remote_zip(uint32_t index, const InputCallbacks& cb, FdSource& src,
                                  const std::string& where) {
  InputInfo& info = inputs_[index];
  const uint64_t size = src.stream->size().value_or(info.size);
  if (size == 0) return false;  // a chunked answer, no HEAD: libarchive streams it
  const remote::Target target = remote::target_for(info.path, *options_.remote);
  const std::string etag = src.stream->etag();
  RangedReadAt ranged(
      [&](uint64_t offset, size_t n) {
        return fetch_range(target, *options_.remote, options_.stop, offset, n, size, etag,
                           src.range_retries);
      },
      size);
  return read_zip(
      index, cb, src, where,
      [&ranged](uint64_t offset, size_t n, uint8_t* out) { return ranged(offset, n, out); }, size,
      static_cast<size_t>(*src.peeked));
}

}  // namespace tarmac
