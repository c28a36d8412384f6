// InputReader's reader of everything libarchive reads (tar, pax, gnu, ustar, cpio, 7z, ...;
// gzip through ISA-L, zstd, xz, bzip2), streamed from a file, standard input, a pipe: command or
// a remote object; a zip file or remote zip object goes to zip_input.cpp first.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/printable.h"
#include "common/utf8.h"
#include "remote/http.h"
#include "remote/inputs.h"
#include "remote/url.h"
#include "source/input_reader_internal.h"
#include "source/zip_directory.h"

namespace tarmac {
using detail::bad_name_notice;
using detail::normalise;
using detail::read_raw;

namespace {

la_ssize_t read_cb(struct archive*, void* client, const void** out) {
  auto* src = static_cast<FdSource*>(client);
  if (!src->sniffed) {
    src->sniffed = true;
    const ssize_t n = src->peeked ? *src->peeked : read_raw(src);
    if (n < 0) return -1;
    if (!GzipInflater::starts_gzip(src->buffer.data(), static_cast<size_t>(n))) {
      *out = src->buffer.data();
      return n;
    }
    src->gzip = std::make_unique<GzipInflater>();
    src->inflated.resize(kReadBlock);
    src->gzip->feed(src->buffer.data(), static_cast<size_t>(n));
  }
  if (!src->gzip) {
    const ssize_t n = read_raw(src);
    *out = src->buffer.data();
    return n;
  }
  try {
    while (true) {
      const size_t got = src->gzip->read(src->inflated.data(), src->inflated.size(), src->raw_end);
      if (got > 0) {
        *out = src->inflated.data();
        return static_cast<la_ssize_t>(got);
      }
      if (src->raw_end) return 0;
      const ssize_t n = read_raw(src);  // read() consumed the buffer before asking for more
      if (n < 0) return -1;
      if (n == 0)
        src->raw_end = true;
      else
        src->gzip->feed(src->buffer.data(), static_cast<size_t>(n));
    }
  } catch (const ParseError& e) {
    src->read_error = e.what();
    return -1;
  }
}

// True when the file at `fd` starts with a gzip header (read without moving the offset).
bool file_starts_gzip(int fd) {
  uint8_t head[3];
  return ::pread(fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head) &&
         GzipInflater::starts_gzip(head, sizeof head);
}

// A remote input's first bytes (4 at least, unless it is shorter) into src.buffer, to tell a zip;
// they stay there for libarchive (src.peeked) when it is not one. False when the read failed.
bool peek_remote(FdSource& src) {
  size_t have = 0;
  while (have < 4) {
    const ssize_t n = read_raw(&src, have);
    if (n < 0) {
      src.peeked = -1;  // libarchive's first read fails with the stream's error
      return false;
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  src.peeked = static_cast<ssize_t>(have);
  return true;
}

la_int64_t seek_cb(struct archive*, void* client, la_int64_t offset, int whence) {
  auto* src = static_cast<FdSource*>(client);
  src->seeked = true;
  const off_t r = ::lseek(src->fd, static_cast<off_t>(offset), whence);
  return r < 0 ? ARCHIVE_FATAL : static_cast<la_int64_t>(r);
}

// CRC-32 and length of a whole file, for inputs libarchive did not read straight through.
void checksum_file(const std::string& path, InputInfo& info) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FatalError("cannot reopen '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> buf(kReadBlock);
  uint32_t crc = 0;
  uint64_t total = 0;
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    crc = crc32_update(crc, buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  info.crc32 = crc;
  info.bytes_read = total;
}

int close_cb(struct archive*, void* client) {
  auto* src = static_cast<FdSource*>(client);
  if (src->owned && src->fd >= 0) {
    ::close(src->fd);
    src->fd = -1;  // standard input stays open: it is read to its end after the archive
  }
  return ARCHIVE_OK;
}

// libarchive's message for the last error; it may have none (a null pointer).
std::string archive_error(struct archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown error";
}

// Why the archive libarchive read to its end (ARCHIVE_EOF) lacks its end, or "": a tar must end
// with its two 512-byte zero blocks (libarchive takes the end of the bytes, or one zero block,
// for it); a zip read as a stream (without its central directory first) is read to its end,
// which must be its end-of-central-directory record. (An input with no byte holds no member:
// the run then converts nothing from it, refused unless --allow-empty.)
std::string missing_end(struct archive* a, FdSource& src, const std::string& last) {
  const InputInfo& info = *src.info;
  const auto read = [&] {
    std::string s = "; " + std::to_string(info.bytes_read) + " byte(s) read";
    if (info.size > info.bytes_read) s += " of its " + std::to_string(info.size);
    return s;
  };
  const int format = archive_format(a) & ARCHIVE_FORMAT_BASE_MASK;
  const auto after = last.empty() ? std::string("before its first member")
                                  : "after member '" + printable(last) + "'";
  if (format == ARCHIVE_FORMAT_TAR) {
    const la_int64_t at = archive_read_header_position(a);
    if (archive_filter_bytes(a, 0) - at >= 1024) return "";
    return "truncated: the tar ends " + after + " at byte " + std::to_string(at) +
           " without its end-of-archive blocks (an interrupted download or copy?)" + read();
  }
  if (format == ARCHIVE_FORMAT_ZIP && !src.seekable && archive_filter_count(a) == 1 && !src.gzip) {
    while (true) {
      const ssize_t n = read_raw(&src);
      if (n < 0) return "the zip cannot be read to its end";  // fail() adds the read error
      if (n == 0) break;
    }
    if (detail::ends_with_zip_end(src.tail)) return "";
    return "truncated: the zip ends " + after +
           " without its central directory's end record (an interrupted download or copy?)" +
           read();
  }
  return "";
}

// A libarchive reader of every filter and format over `src`. Seeking lets the zip reader use
// the central directory (the only reliable record of symlinks and sizes); stdin, pipes and gzip
// (decompressed in read_cb) are read as streams.
std::unique_ptr<archive, decltype(&archive_read_free)> new_reader(FdSource& src) {
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  struct stat st {};
  if (src.owned && ::fstat(src.fd, &st) == 0 && S_ISREG(st.st_mode) && !file_starts_gzip(src.fd)) {
    archive_read_set_seek_callback(a.get(), seek_cb);
    src.seekable = true;
  }
  return a;
}

// True for an entry that is no sample member: a directory (silently), a name that is not UTF-8,
// a hard or symbolic link, or another file that is not regular (each with its notice).
bool skipped_entry(uint32_t index, archive_entry* entry, const std::string& name,
                   const InputCallbacks& cb) {
  const auto type = archive_entry_filetype(entry);
  if (type == AE_IFDIR) return true;  // directories carry no sample data
  if (!is_valid_utf8(name)) {
    cb.on_notice(bad_name_notice(index, name));
    return true;
  }
  if (archive_entry_hardlink(entry) != nullptr) {
    cb.on_notice({index, name, "hard link, not followed", false, ErrorCode::Link});
    return true;
  }
  if (type != AE_IFREG) {
    cb.on_notice({index, name,
                  type == AE_IFLNK ? "symbolic link, not followed" : "not a regular file", false,
                  type == AE_IFLNK ? ErrorCode::Link : ErrorCode::NotRegularFile});
    return true;
  }
  return false;
}

enum class DataRead { Whole, TooBig, Corrupt };

// The current member's data appended to `data`, read through `chunk`; stops at TooBig once it
// would pass `max_size` bytes.
DataRead read_member_data(struct archive* a, std::vector<uint8_t>& data,
                          std::vector<uint8_t>& chunk, uint64_t max_size) {
  while (true) {
    la_ssize_t n = archive_read_data(a, chunk.data(), chunk.size());
    if (n == 0) return DataRead::Whole;
    if (n < 0) {
      if (n == ARCHIVE_WARN) continue;
      return DataRead::Corrupt;
    }
    if (data.size() + static_cast<uint64_t>(n) > max_size) return DataRead::TooBig;
    data.insert(data.end(), chunk.data(), chunk.data() + n);
  }
}

}  // namespace

void InputReader::read_archive(uint32_t index, const InputCallbacks& cb) {
  InputInfo& info = inputs_[index];
  const std::string where = info.path == "-"     ? "standard input"
                            : is_pipe(info.path) ? "the output of '" + printable(info.path) + "'"
                                                 : "archive '" + info.path + "'";
  FdSource src;
  src.info = &info;
  src.total = &bytes_read_;
  if (expected_ && expected_->mark.input == index && !expected_->mark.at_end) {
    src.check_at = expected_->mark.bytes;
    src.check_crc = expected_->mark.crc32;
    src.expected = &expected_;
  }
  if (info.path == "-") {
    src.fd = 0;
  } else if (remote::is_remote(info.path)) {
    if (!options_.remote)
      options_.remote =
          std::make_shared<const remote::RemoteConfig>(remote::RemoteConfig::from_environment());
    src.stream = std::make_unique<remote::HttpStream>(
        remote::target_for(info.path, *options_.remote), *options_.remote, options_.stop);
    if (info.size > 0) src.stream->expect_size(info.size);
  } else if (is_pipe(info.path)) {
    src.pipe = std::make_unique<PipeStream>(info.path, options_.stop);
  } else {
    src.fd = ::open(info.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (src.fd < 0) throw FatalError("cannot open " + where + ": " + std::strerror(errno));
    src.owned = true;
    ::posix_fadvise(src.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  }

  struct stat st {};
  uint8_t head[4];
  if (src.owned && ::fstat(src.fd, &st) == 0 && S_ISREG(st.st_mode) &&
      ::pread(src.fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head) &&
      starts_zip(head, sizeof head)) {
    const int fd = src.fd;
    const ReadAt pread_at = [fd](uint64_t offset, size_t size, uint8_t* out) {
      size_t got = 0;
      while (got < size) {
        const ssize_t n = ::pread(fd, out + got, size - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<size_t>(n);
      }
      return true;
    };
    bool done = false;
    try {
      done = read_zip(index, cb, src, where, pread_at, info.size, 0);
    } catch (...) {
      close_cb(nullptr, &src);
      throw;
    }
    if (done) {
      close_cb(nullptr, &src);
      return;
    }
  }
  // A remote zip is read by its central directory too: its first bytes tell it (no request
  // more for a tar), then its end is read by Range GETs.
  const bool remote_zip = src.stream && peek_remote(src) && *src.peeked >= 4 &&
                          starts_zip(src.buffer.data(), static_cast<size_t>(*src.peeked));
  if (!remote_zip || !read_remote_zip(index, cb, src, where)) read_entries(index, cb, src, where);
  // A stream is read to its end, past the archive's (its zero blocks, padding): a pipe's
  // command's exit status then says whether it wrote all it meant to, and a remote object's
  // length is checked against the size its listing or HEAD declared.
  if ((src.pipe || src.stream || info.path == "-") && info.error.empty()) {
    ssize_t n;
    while ((n = read_raw(&src)) > 0) {
    }
    if (n < 0) {
      if (src.changed) refuse_changed(index);
      if (!options_.skip_errors) throw FatalError(src.read_error);
      info.error = src.read_error;
    }
    if (info.error.empty() && options_.pipe_runs)
      options_.pipe_runs->check(info.path, info.bytes_read, info.crc32);
  }
  if (src.stream) {
    info.retries = src.stream->counts().retries + src.range_retries;
    info.resumed_bytes = src.stream->counts().resumed_bytes;
    if (const auto size = src.stream->size()) info.size = *size;
  }
  if (src.changed) refuse_changed(index);  // whatever libarchive made of the failed read
  if (src.seeked && info.error.empty() && !names_only_) checksum_file(info.path, info);
}

void InputReader::read_entries(uint32_t index, const InputCallbacks& cb, FdSource& src,
                               const std::string& where) {
  InputInfo& info = inputs_[index];
  const auto a = new_reader(src);
  if (archive_read_open(a.get(), &src, nullptr, read_cb, close_cb) != ARCHIVE_OK) {
    if (src.changed) refuse_changed(index);
    // A read or gzip error while libarchive looked at the first blocks says more than its own.
    std::string msg = src.remote_failed ? src.read_error
                      : src.read_error.empty()
                          ? where + " is not an archive tarmac can read: " + archive_error(a.get())
                          : where + " cannot be read: " + src.read_error;
    if (!options_.skip_errors) throw FatalError(msg);
    info.error = msg;
    return;
  }

  if (src.gzip)
    info.compression = "gzip";
  else if (archive_filter_count(a.get()) > 1)  // the last filter is the bytes as read
    info.compression = archive_filter_name(a.get(), 0);

  auto fail = [&](const std::string& what) {
    if (src.changed) refuse_changed(index);
    std::string msg = where + ": " + what;
    if (src.remote_failed)  // the network's one line says more than libarchive's
      msg = src.read_error;
    else if (!src.read_error.empty())
      msg += " (read error: " + src.read_error + ")";
    if (!options_.skip_errors) throw FatalError(msg);
    info.error = msg;
  };

  archive_entry* entry = nullptr;
  std::vector<uint8_t> chunk(1 << 16);
  std::string last;  // the last member's name, for a message about the archive's end
  while (true) {
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) {
      // libarchive ends a tar where its bytes end, also right after a member: what a cut copy
      // or download leaves. Its end, and a streamed zip's, is checked here.
      const std::string why = missing_end(a.get(), src, last);
      if (!why.empty()) fail(why);
      break;
    }
    if (r == ARCHIVE_FATAL || r == ARCHIVE_RETRY) {
      fail("archive is truncated or corrupt: " + archive_error(a.get()));
      return;
    }
    const char* raw_name = archive_entry_pathname(entry);
    std::string name = normalise(raw_name ? raw_name : "");
    last = name;
    ++info.members;
    if (skipped_entry(index, entry, name, cb)) continue;
    // libarchive skips the data of a member not admitted on the next header read
    if (!admit(index, cb, name, static_cast<uint64_t>(archive_entry_size(entry)),
               archive_entry_size_is_set(entry)))
      continue;
    Member m;
    m.name = std::move(name);
    if (names_only_) {
      cb.on_member(index, std::move(m));
      continue;
    }
    if (archive_entry_size_is_set(entry))
      m.data.reserve(static_cast<size_t>(archive_entry_size(entry)));
    const DataRead read = read_member_data(a.get(), m.data, chunk, options_.max_member_size);
    if (read == DataRead::Corrupt) {
      fail("member '" + m.name + "' is truncated or corrupt: " + archive_error(a.get()));
      return;
    }
    if (read == DataRead::TooBig) {
      cb.on_notice(
          {index, m.name,
           "member inflates past --max-member-size " + format_bytes(options_.max_member_size), true,
           ErrorCode::MemberTooLarge});
      continue;
    }
    cb.on_member(index, std::move(m));
  }
}

}  // namespace tarmac
