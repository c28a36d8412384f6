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
#include <utility>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/utf8.h"
#include "source/gzip_inflater.h"

namespace tarmac {
namespace fs = std::filesystem;

constexpr size_t kReadBlock = 1 << 20;

// Feeds libarchive from a file descriptor, checksumming every byte on the way. A gzip stream
// is decompressed here with ISA-L (gzip_inflater.h) rather than by libarchive's zlib filter.
struct FdSource {
  int fd = -1;
  bool owned = false;
  InputInfo* info = nullptr;
  std::atomic<uint64_t>* total = nullptr;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kReadBlock);
  std::string read_error;
  bool seeked = false;   // libarchive jumped (zip central directory, skipped data)
  bool sniffed = false;  // the first bytes were looked at for gzip
  std::unique_ptr<GzipInflater> gzip;
  std::vector<uint8_t> inflated;  // gzip: what libarchive is handed
  bool raw_end = false;           // gzip: the input is read to its end
};

namespace {

// The next bytes of the input into src->buffer, checksummed and counted; -1 on error.
ssize_t read_raw(FdSource* src) {
  ssize_t n;
  do {
    n = ::read(src->fd, src->buffer.data(), src->buffer.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    src->read_error = std::strerror(errno);
    return -1;
  }
  src->info->crc32 = crc32_update(src->info->crc32, src->buffer.data(), static_cast<size_t>(n));
  src->info->bytes_read += static_cast<uint64_t>(n);
  src->total->fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  return n;
}

la_ssize_t read_cb(struct archive*, void* client, const void** out) {
  auto* src = static_cast<FdSource*>(client);
  if (!src->sniffed) {
    src->sniffed = true;
    const ssize_t n = read_raw(src);
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
  if (src->owned && src->fd >= 0) ::close(src->fd);
  src->fd = -1;
  return ARCHIVE_OK;
}

// libarchive's message for the last error; it may have none (a null pointer).
std::string archive_error(struct archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown error";
}

std::string normalise(std::string name) {
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  return name;
}

}  // namespace

InputReader::InputReader(const std::vector<std::string>& paths, InputReaderOptions options)
    : options_(std::move(options)) {
  for (auto& p : paths) {
    InputInfo info;
    info.path = p;
    if (p != "-") {
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
    if (i.path == "-" || (i.size == 0 && !fs::is_regular_file(i.path))) return 0;
    total += i.size;
  }
  return total;
}

void InputReader::run(const InputCallbacks& cb) {
  for (uint32_t i = 0; i < inputs_.size(); ++i) {
    const auto& path = inputs_[i].path;
    if (path != "-" && fs::is_directory(path))
      read_directory(i, cb);
    else
      read_archive(i, cb);
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
  const std::string where = info.path == "-" ? "standard input" : "archive '" + info.path + "'";
  FdSource src;
  src.info = &info;
  src.total = &bytes_read_;
  if (info.path == "-") {
    src.fd = 0;
  } else {
    src.fd = ::open(info.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (src.fd < 0) throw FatalError("cannot open " + where + ": " + std::strerror(errno));
    src.owned = true;
    ::posix_fadvise(src.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  }

  read_entries(index, cb, src, where);
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
  if (src.owned && ::fstat(src.fd, &st) == 0 && S_ISREG(st.st_mode) && !file_starts_gzip(src.fd))
    archive_read_set_seek_callback(a.get(), seek_cb);
  if (archive_read_open(a.get(), &src, nullptr, read_cb, close_cb) != ARCHIVE_OK) {
    // A read or gzip error while libarchive looked at the first blocks says more than its own.
    std::string msg = src.read_error.empty()
                          ? where + " is not an archive tarmac can read: " + archive_error(a.get())
                          : where + " cannot be read: " + src.read_error;
    if (!options_.skip_errors) throw FatalError(msg);
    info.error = msg;
    return;
  }

  auto fail = [&](const std::string& what) {
    std::string msg = where + ": " + what;
    if (!src.read_error.empty()) msg += " (read error: " + src.read_error + ")";
    if (!options_.skip_errors) throw FatalError(msg);
    info.error = msg;
  };

  archive_entry* entry = nullptr;
  std::vector<uint8_t> chunk(1 << 16);
  while (true) {
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_FATAL || r == ARCHIVE_RETRY) {
      fail("archive is truncated or corrupt: " + archive_error(a.get()));
      return;
    }
    const char* raw_name = archive_entry_pathname(entry);
    std::string name = normalise(raw_name ? raw_name : "");
    ++info.members;
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) continue;  // directories carry no sample data
    if (!is_valid_utf8(name)) {
      cb.on_notice({index, name, "member name is not valid UTF-8", true, ErrorCode::BadMemberName});
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
    if (auto why = unsafe_name_reason(name); !why.empty()) {
      cb.on_notice(
          {index, name, "unsafe member name (" + why + ")", true, ErrorCode::UnsafeMemberName});
      continue;
    }
    if (archive_entry_size_is_set(entry) &&
        static_cast<uint64_t>(archive_entry_size(entry)) > options_.max_member_size) {
      cb.on_notice({index, name,
                    "member is " + format_bytes(static_cast<uint64_t>(archive_entry_size(entry))) +
                        ", over --max-member-size " + format_bytes(options_.max_member_size),
                    true, ErrorCode::MemberTooLarge});
      continue;  // libarchive skips the data on the next header read
    }
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
      cb.on_notice({index, rel.lexically_normal().generic_string(), "symbolic link, not followed",
                    false, ErrorCode::Link});
      continue;
    }
    if (e.is_directory() && excluded(e.path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (e.is_regular_file()) files.push_back(e.path());
  }
  if (ec) throw FatalError("cannot list directory '" + info.path + "': " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string name = fs::relative(f, root).generic_string();
    ++info.members;
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
    info.crc32 = crc32_update(info.crc32, m.data.data(), size);
    info.bytes_read += size;
    bytes_read_.fetch_add(size, std::memory_order_relaxed);
    cb.on_member(index, std::move(m));
  }
}

}  // namespace tarmac
