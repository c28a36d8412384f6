#include "source/input_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <utility>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/printable.h"
#include "common/utf8.h"
#include "remote/http.h"
#include "remote/inputs.h"
#include "remote/url.h"
#include "source/gzip_inflater.h"
#include "source/pipe_stream.h"
#include "source/zip_directory.h"

namespace tarmac {
namespace fs = std::filesystem;

constexpr size_t kReadBlock = 1 << 20;
constexpr uint64_t kNoCheck = UINT64_MAX;

// Feeds libarchive from a file descriptor, checksumming every byte on the way. A gzip stream
// is decompressed here with ISA-L (gzip_inflater.h) rather than by libarchive's zlib filter.
struct FdSource {
  int fd = -1;
  bool owned = false;
  std::unique_ptr<remote::HttpStream> stream;  // a remote input: read from it, not from fd
  std::unique_ptr<PipeStream> pipe;            // a pipe: input: read from it, not from fd
  bool remote_failed = false;  // read_error is the (remote or pipe) stream's one-line error
  std::string stream_error;    // the stream failed after filling part of a block: said next
  InputInfo* info = nullptr;
  std::atomic<uint64_t>* total = nullptr;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kReadBlock);
  std::string read_error;
  bool seeked = false;   // libarchive jumped (zip central directory, skipped data)
  bool sniffed = false;  // the first bytes were looked at for gzip
  // A remote input's first bytes, already read into `buffer` to tell a zip (peek_remote): what
  // read_raw returned for them, handed to libarchive first.
  std::optional<ssize_t> peeked;
  uint32_t range_retries = 0;  // of the Range GETs that read a remote zip's central directory
  std::unique_ptr<GzipInflater> gzip;
  std::vector<uint8_t> inflated;  // gzip: what libarchive is handed
  bool raw_end = false;           // gzip: the input is read to its end
  // Resuming: the CRC-32 the input's first check_at bytes must have (kNoCheck: none); checked
  // as soon as they are read (then `expected`, the reader's, is met: reset), or `changed` (the
  // read then fails).
  uint64_t check_at = kNoCheck;
  uint32_t check_crc = 0;
  std::optional<ReadExpectation>* expected = nullptr;
  bool changed = false;
  // The input's last bytes as read (at most a zip's end record and comment): a zip read as a
  // stream must end with its end-of-central-directory record.
  std::vector<uint8_t> tail;
  bool seekable = false;  // libarchive was given seek_cb (its zip reader reads the directory)
};

namespace {

constexpr size_t kZipEndRecord = 22;       // the end-of-central-directory record, no comment
constexpr size_t kZipMaxComment = 0xffff;  // its comment's length is 16 bits
constexpr size_t kTailBytes = kZipEndRecord + kZipMaxComment;

void keep_tail(std::vector<uint8_t>& tail, const uint8_t* p, size_t n) {
  if (n >= kTailBytes) {
    tail.assign(p + n - kTailBytes, p + n);
    return;
  }
  if (tail.size() + n > kTailBytes)
    tail.erase(tail.begin(), tail.begin() + static_cast<ptrdiff_t>(tail.size() + n - kTailBytes));
  tail.insert(tail.end(), p, p + n);
}

// True when `tail`, the last bytes of a zip, ends with its end-of-central-directory record (a
// cut anywhere before that, in a member or in the directory, leaves it out).
bool ends_with_zip_end(const std::vector<uint8_t>& tail) {
  if (tail.size() < kZipEndRecord) return false;
  for (size_t at = tail.size() - kZipEndRecord + 1; at-- > 0;) {
    const uint8_t* p = tail.data() + at;
    if (p[0] == 'P' && p[1] == 'K' && p[2] == 5 && p[3] == 6 &&
        at + kZipEndRecord + (p[20] | (p[21] << 8)) <= tail.size())
      return true;
  }
  return false;
}

// The next bytes of the input into src->buffer from `at`, checksummed and counted; -1 on error.
ssize_t read_raw(FdSource* src, size_t at = 0) {
  uint8_t* const into = src->buffer.data() + at;
  const size_t room = src->buffer.size() - at;
  ssize_t n;
  if (src->stream || src->pipe) {
    // A whole block unless the stream ends, as a file gives: where samples are released (the
    // checkpoint's read positions) must not depend on how the bytes arrived, or a --resume
    // would find a sample after the checkpoint released before its recorded position.
    size_t got = 0;
    try {
      if (!src->stream_error.empty()) throw FatalError(src->stream_error);
      while (got < room) {
        uint8_t* to = into + got;
        const size_t want = room - got;
        const size_t r = src->stream ? src->stream->read(to, want) : src->pipe->read(to, want);
        if (r == 0) break;
        got += r;
      }
    } catch (const std::exception& e) {  // libarchive's callbacks are C: nothing thrown through
      if (got == 0) {
        src->read_error = e.what();
        src->remote_failed = true;
        return -1;
      }
      src->stream_error = e.what();  // the bytes read first are handed on
    }
    n = static_cast<ssize_t>(got);
  } else {
    do {
      n = ::read(src->fd, into, room);
    } while (n < 0 && errno == EINTR);
  }
  if (n < 0) {
    src->read_error = std::strerror(errno);
    return -1;
  }
  if (src->check_at != kNoCheck &&
      src->info->bytes_read + static_cast<uint64_t>(n) >= src->check_at) {
    const auto part = static_cast<size_t>(src->check_at - src->info->bytes_read);
    if (crc32_update(src->info->crc32, into, part) != src->check_crc) {
      src->changed = true;
      src->read_error = "the input changed since the checkpoint";
      return -1;
    }
    src->check_at = kNoCheck;
    src->expected->reset();
  }
  src->info->crc32 = crc32_update(src->info->crc32, into, static_cast<size_t>(n));
  if (!src->seekable) keep_tail(src->tail, into, static_cast<size_t>(n));
  src->info->bytes_read += static_cast<uint64_t>(n);
  src->total->fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  return n;
}

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

// A member name with its "." segments and repeated slashes taken out ("./d/./x.jpg" and
// "d//x.jpg" are "d/x.jpg"), so that names extracting to one path are one key. A leading '/'
// and ".." segments are kept, for admit() to refuse.
std::string normalise(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  if (!name.empty() && name.front() == '/') out = "/";
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string_view part(name.data() + start, end - start);
    if (!part.empty() && part != ".") {
      if (!out.empty() && out.back() != '/') out += '/';
      out += part;
    }
    start = end + 1;
  }
  return out;
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
    if (ends_with_zip_end(src.tail)) return "";
    return "truncated: the zip ends " + after +
           " without its central directory's end record (an interrupted download or copy?)" +
           read();
  }
  return "";
}

// A name that is not UTF-8 (in a tar, a zip or a folder) leaves its member out; the notice holds
// it escaped, so the manifest (JSON) and the terminal can show it.
MemberNotice bad_name_notice(uint32_t input, std::string_view name) {
  return {input, printable(name), "member name is not valid UTF-8", true, ErrorCode::BadMemberName};
}

}  // namespace

InputReader::InputReader(const std::vector<std::string>& paths, InputReaderOptions options)
    : options_(std::move(options)) {
  for (auto& p : paths) {
    InputInfo info;
    info.path = p;
    if (remote::is_remote(p)) {
      info.size = remote::known_size(p).value_or(0);
    } else if (is_pipe(p)) {
      pipe_command(p);  // names a command
    } else if (p != "-") {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0)
        throw FatalError("cannot open input '" + p + "': " + std::strerror(errno));
      if (S_ISREG(st.st_mode)) info.size = static_cast<uint64_t>(st.st_size);
    }
    inputs_.push_back(std::move(info));
  }
}

uint64_t InputReader::total_size() const {
  uint64_t total = 0;
  for (const auto& i : inputs_) {
    if (i.path == "-" || is_pipe(i.path) ||
        (i.size == 0 && (remote::is_remote(i.path) || !fs::is_regular_file(i.path))))
      return 0;
    total += i.size;
  }
  return total;
}

void InputReader::expect(ReadExpectation e) {
  if (e.mark.input >= inputs_.size() || e.done.size() != e.mark.input)
    throw FatalError("cannot resume: the checkpoint records a position in input " +
                     std::to_string(e.mark.input + 1) + " of " + std::to_string(inputs_.size()) +
                     "; run again with --overwrite to start again");
  expected_ = std::move(e);
}

ReadMark InputReader::mark() const {
  if (inputs_.empty()) return {};
  const InputInfo& info = inputs_[current_];
  return {current_, info.bytes_read, info.crc32, at_end_};
}

void InputReader::refuse_changed(uint32_t index) const {
  if (is_pipe(inputs_[index].path))
    throw InputChanged("cannot resume: input '" + printable(inputs_[index].path) +
                       "' changed since the checkpoint: the command wrote other bytes than it "
                       "wrote for the interrupted run, so the samples converted from it may not "
                       "match it. Run the same command with --overwrite to convert everything "
                       "again");
  throw InputChanged(
      "cannot resume: input '" + inputs_[index].path +
      "' changed since the checkpoint: its bytes differ from those the interrupted run read, "
      "though its size and modification time are the same (a file rewritten in place, e.g. by "
      "rsync -a, tar -x or cp -p, keeps both), so the samples converted from it may hold its "
      "old data. Run the same command with --overwrite to convert everything again");
}

// Resuming: an input read to its end must have read as before, up to where the checkpoint's
// position lies.
void InputReader::check_input_end(uint32_t index) {
  if (!expected_) return;
  const ReadMark& m = expected_->mark;
  const InputInfo& info = inputs_[index];
  if (index < m.input) {
    if (expected_->done[index] != std::pair(info.bytes_read, info.crc32)) refuse_changed(index);
  } else if (index == m.input) {
    // A position inside the input was checked as it was read past; one not reached, or an end
    // that differs, is a change.
    if (!m.at_end || info.bytes_read != m.bytes || info.crc32 != m.crc32) refuse_changed(index);
    expected_.reset();
  }
}

void InputReader::run(const InputCallbacks& cb) {
  for (uint32_t i = 0; i < inputs_.size(); ++i) {
    current_ = i;
    at_end_ = false;
    if (expected_ && expected_->mark.input == i && !expected_->mark.at_end &&
        expected_->mark.bytes == 0) {
      if (expected_->mark.crc32 != 0) refuse_changed(i);
      expected_.reset();
    }
    const auto& path = inputs_[i].path;
    if (path != "-" && !remote::is_remote(path) && !is_pipe(path) && fs::is_directory(path))
      read_directory(i, cb);
    else
      read_archive(i, cb);
    check_input_end(i);
    at_end_ = true;
    cb.on_input_end(i);
  }
}

void InputReader::run_names_only(const InputCallbacks& cb) {
  names_only_ = true;
  try {
    run(cb);
  } catch (...) {
    names_only_ = false;
    throw;
  }
  names_only_ = false;
}

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
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  // Seeking lets the zip reader use the central directory (the only reliable record of
  // symlinks and sizes); stdin, pipes and gzip (decompressed in read_cb) are read as streams.
  struct stat st {};
  if (src.owned && ::fstat(src.fd, &st) == 0 && S_ISREG(st.st_mode) && !file_starts_gzip(src.fd)) {
    archive_read_set_seek_callback(a.get(), seek_cb);
    src.seekable = true;
  }
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
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) continue;  // directories carry no sample data
    if (!is_valid_utf8(name)) {
      cb.on_notice(bad_name_notice(index, name));
      continue;
    }
    if (archive_entry_hardlink(entry) != nullptr) {
      cb.on_notice({index, name, "hard link, not followed", false, ErrorCode::Link});
      continue;
    }
    if (type != AE_IFREG) {
      cb.on_notice({index, name,
                    type == AE_IFLNK ? "symbolic link, not followed" : "not a regular file", false,
                    type == AE_IFLNK ? ErrorCode::Link : ErrorCode::NotRegularFile});
      continue;
    }
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
    bool too_big = false;
    while (true) {
      la_ssize_t n = archive_read_data(a.get(), chunk.data(), chunk.size());
      if (n == 0) break;
      if (n < 0) {
        if (n == ARCHIVE_WARN) continue;
        fail("member '" + m.name + "' is truncated or corrupt: " + archive_error(a.get()));
        return;
      }
      if (m.data.size() + static_cast<uint64_t>(n) > options_.max_member_size) {
        too_big = true;
        break;
      }
      m.data.insert(m.data.end(), chunk.data(), chunk.data() + n);
    }
    if (too_big) {
      cb.on_notice(
          {index, m.name,
           "member inflates past --max-member-size " + format_bytes(options_.max_member_size), true,
           ErrorCode::MemberTooLarge});
      continue;
    }
    cb.on_member(index, std::move(m));
  }
}

bool InputReader::excluded(const fs::path& dir) const {
  std::error_code ec;
  for (const auto& x : options_.exclude)
    if (fs::equivalent(dir, x, ec)) return true;
  return false;
}

// A regular member's name and declared size: true when it may be read, else a notice says why.
bool InputReader::admit(uint32_t index, const InputCallbacks& cb, const std::string& name,
                        uint64_t size, bool size_known) {
  if (auto why = unsafe_name_reason(name); !why.empty()) {
    cb.on_notice(
        {index, name, "unsafe member name (" + why + ")", true, ErrorCode::UnsafeMemberName});
    return false;
  }
  if (size_known && size > options_.max_member_size) {
    cb.on_notice({index, name,
                  "member is " + format_bytes(size) + ", over --max-member-size " +
                      format_bytes(options_.max_member_size),
                  true, ErrorCode::MemberTooLarge});
    return false;
  }
  return true;
}

namespace {

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

void InputReader::read_directory(uint32_t index, const InputCallbacks& cb) {
  InputInfo& info = inputs_[index];
  const fs::path root(info.path);
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const auto& e = *it;
    if (e.is_symlink()) {
      // relative() would follow the link itself: make only its directory relative.
      const fs::path rel = fs::relative(e.path().parent_path(), root) / e.path().filename();
      std::string name = rel.lexically_normal().generic_string();
      // as in an archive, the name is checked first: a notice's name goes into the manifest
      if (!is_valid_utf8(name))
        cb.on_notice(bad_name_notice(index, name));
      else
        cb.on_notice({index, name, "symbolic link, not followed", false, ErrorCode::Link});
      continue;
    }
    if (e.is_directory() && excluded(e.path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (e.is_directory() && options_.dataset_in_folder) {
      if (std::string why = options_.dataset_in_folder(e.path()); !why.empty()) {
        it.disable_recursion_pending();
        std::string name = fs::relative(e.path(), root).generic_string() + "/";
        if (!is_valid_utf8(name))
          cb.on_notice(bad_name_notice(index, name));
        else
          cb.on_notice({index, name, why, false, ErrorCode::TarmacDataset});
        continue;
      }
    }
    if (e.is_regular_file()) {
      files.push_back(e.path());
    } else if (!e.is_directory()) {
      // a FIFO, socket or device: listed as a tar's is, never left out unsaid
      std::string name = fs::relative(e.path(), root).generic_string();
      if (!is_valid_utf8(name))
        cb.on_notice(bad_name_notice(index, name));
      else
        cb.on_notice({index, name, "not a regular file", false, ErrorCode::NotRegularFile});
    }
  }
  if (ec) throw FatalError("cannot list directory '" + info.path + "': " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string name = fs::relative(f, root).generic_string();
    ++info.members;
    // a file's name is a member name, held to the rule of tar and zip members
    if (!is_valid_utf8(name)) {
      cb.on_notice(bad_name_notice(index, name));
      continue;
    }
    uint64_t size = fs::file_size(f, ec);
    if (ec) throw FatalError("cannot read '" + f.string() + "': " + ec.message());
    info.size += size;
    if (size > options_.max_member_size) {
      cb.on_notice({index, name,
                    "file is " + format_bytes(size) + ", over --max-member-size " +
                        format_bytes(options_.max_member_size),
                    true, ErrorCode::MemberTooLarge});
      continue;
    }
    if (names_only_) {
      cb.on_member(index, Member{name, {}});
      continue;
    }
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FatalError("cannot open '" + f.string() + "': " + std::strerror(errno));
    Member m;
    m.name = name;
    m.data.resize(size);
    size_t got = 0;
    while (got < size) {
      ssize_t n = ::read(fd, m.data.data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        throw FatalError("cannot read '" + f.string() +
                         "': " + (n < 0 ? std::strerror(errno) : "file shrank while reading"));
      }
      got += static_cast<size_t>(n);
    }
    ::close(fd);
    // Resuming: the position the checkpoint recorded is checked once it is read past.
    if (expected_ && expected_->mark.input == index && !expected_->mark.at_end &&
        info.bytes_read + size >= expected_->mark.bytes) {
      const auto part = static_cast<size_t>(expected_->mark.bytes - info.bytes_read);
      if (crc32_update(info.crc32, m.data.data(), part) != expected_->mark.crc32)
        refuse_changed(index);
      expected_.reset();
    }
    info.crc32 = crc32_update(info.crc32, m.data.data(), size);
    info.bytes_read += size;
    bytes_read_.fetch_add(size, std::memory_order_relaxed);
    cb.on_member(index, std::move(m));
  }
}

}  // namespace tarmac
