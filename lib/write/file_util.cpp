#include "write/file_util.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/error.h"

namespace tarmac {

std::string io_error_reason(int err, std::optional<uint64_t> free_bytes) {
  constexpr uint64_t kFull = 1 << 20;
  if (err == ENOSPC) return "no space left on device";
  if (err == EDQUOT) return "no space left on device for this user (disk quota exceeded)";
  if (err == EFBIG) {
    // SIGXFSZ is ignored (main), so a write past RLIMIT_FSIZE fails here instead of killing
    // tarmac without a word; the checkpoint is kept as for a full disk.
    rlimit lim{};
    if (::getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
      return "file size limit (ulimit -f) of " + std::to_string(lim.rlim_cur) +
             " bytes reached; resume with --resume after raising it";
    return "file too large for its file system (EFBIG); resume with --resume on another one";
  }
  if (err == EIO && free_bytes && *free_bytes < kFull)
    return "no space left on device (the file system, " + std::to_string(*free_bytes) +
           " bytes free, reported an input/output error)";
  return std::strerror(err);
}

void throw_io_error(std::string_view action, const std::string& path, int err) {
  throw FatalError(std::string(action) + " '" + path + "': " + io_error_reason(err));
}

namespace {

// What the file system holding `path` (or its folder) has free for this process: the bytes
// an unprivileged writer may use; root may also use the reserved ones.
std::optional<uint64_t> free_space(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    if (::statvfs(dir.empty() ? "." : dir.c_str(), &st) != 0) return std::nullopt;
  }
  return static_cast<uint64_t>(::geteuid() == 0 ? st.f_bfree : st.f_bavail) * st.f_frsize;
}

}  // namespace

void throw_write_error(std::string_view action, const std::string& path, int err) {
  throw FatalError(std::string(action) + " '" + path +
                   "': " + io_error_reason(err, err == EIO ? free_space(path) : std::nullopt));
}

OutputFile::OutputFile(std::string path) {
  open(std::move(path));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      position_(std::exchange(other.position_, 0)) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    position_ = std::exchange(other.position_, 0);
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// open(2), retried on EINTR; throws the I/O error naming `action` and the path.
int open_for_writing(const std::string& path, int flags, const char* action) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io_error(action, path, errno);
  return fd;
}

}  // namespace

void OutputFile::open(std::string path) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  position_ = 0;
  path_ = std::move(path);
  fd_ = open_for_writing(path_, O_CREAT | O_TRUNC, "cannot open for writing");
}

int reopen_cut_back(const std::string& path, uint64_t size) {
  const int fd = open_for_writing(path, 0, "cannot reopen for writing");
  struct stat st {};
  std::string error;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && static_cast<uint64_t>(st.st_size) < size) {
    error = "it holds " + std::to_string(st.st_size) + " bytes, fewer than the " +
            std::to_string(size) + " its checkpoint recorded";
  } else if (!stat_ok || ::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
             ::lseek(fd, static_cast<off_t>(size), SEEK_SET) < 0) {
    error = std::strerror(errno);  // of the call that failed: the chain stops there
  }
  if (!error.empty()) {
    ::close(fd);
    throw FatalError("cannot resume writing '" + path + "': " + error);
  }
  return fd;
}

void OutputFile::reopen_at(std::string path, uint64_t size) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  position_ = 0;
  path_ = std::move(path);
  fd_ = reopen_cut_back(path_, size);
  position_ = size;
}

void OutputFile::write_all(std::span<const uint8_t> data) {
  if (fd_ < 0) throw FatalError("write to '" + path_ + "' which is not open");
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      throw_write_error("cannot write " + std::to_string(left) + " bytes to", path_, err);
    }
    if (n == 0) throw_io_error("cannot write " + std::to_string(left) + " bytes to", path_, ENOSPC);
    p += n;
    left -= static_cast<size_t>(n);
    position_ += static_cast<uint64_t>(n);
  }
}

void OutputFile::sync() {
  if (fd_ < 0) return;
  // EINVAL: a pipe or device with nothing to synchronize.
  if (::fsync(fd_) != 0 && errno != EINVAL) throw_write_error("cannot fsync", path_, errno);
}

void OutputFile::close() {
  if (fd_ < 0) return;
  int fd = std::exchange(fd_, -1);
  // Linux closes the fd even when close(2) fails, so never retry (not even on EINTR).
  if (::close(fd) != 0 && errno != EINTR) throw_write_error("cannot close", path_, errno);
}

namespace {
void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io_error("cannot open directory", dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw_write_error("cannot fsync directory", dir, err);
}
}  // namespace

void atomic_rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int err = errno;
    throw_io_error("cannot rename '" + from + "' to", to, err);
  }
  std::string parent = std::filesystem::path(to).parent_path().string();
  sync_directory(parent.empty() ? "." : parent);
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  try {
    OutputFile out(tmp);
    out.write_all({reinterpret_cast<const uint8_t*>(content.data()), content.size()});
    out.sync();
    out.close();
    atomic_rename(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace tarmac
