#include "write/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/error.h"
#include "format/lock_record.h"
#include "format/names.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

// The holder's record. It writes it just after taking the lock: a holder found in between
// gets a moment (up to 0.5 s) to finish.
std::string holder_text(int fd) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::string text(4096, '\0');
    const ssize_t n = pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    try {
      return format::holder_description(format::parse_lock_record(text));
    } catch (const ParseError&) {
      ::usleep(10000);
    }
  }
  return "a process that does not say who it is";
}

bool locks_unsupported(int err) {
  return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL;
}

}  // namespace

OutputLock::OutputLock(const fs::path& dir, const std::string& command)
    : path_(dir / format::kLockFile) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw FatalError("output '" + dir.string() + "' exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec)
    throw FatalError("cannot create output directory '" + dir.string() + "': " + ec.message());
  if (const char* off = std::getenv("TARMAC_NO_LOCK"); off && std::string_view(off) == "1") return;
  // The lock file is removed by its holder on release; a process that opened it just before
  // then locks a file no longer in the directory. Retry until the locked file is the named one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw FatalError("cannot open the lock file '" + path_.string() +
                       "': " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        const std::string who = holder_text(fd);
        ::close(fd);
        throw FatalError("output directory '" + dir.string() + "' is in use by another tarmac (" +
                         who +
                         "). Only one command may write into a directory at a time: wait for it "
                         "to end, or stop it (an interrupted convert goes on with --resume), or "
                         "choose another output directory. The lock goes away by itself when "
                         "that process ends");
      }
      ::close(fd);
      if (locks_unsupported(err))
        throw FatalError("cannot lock '" + path_.string() +
                         "': the file system does not support "
                         "flock (" +
                         std::strerror(err) +
                         "), so tarmac cannot make sure it is the only writer of '" + dir.string() +
                         "'. Write to a file system that does (Lustre: mount with -o flock), or "
                         "set TARMAC_NO_LOCK=1 to run without the lock if nothing else writes "
                         "there");
      throw FatalError("cannot lock '" + path_.string() + "': " + std::strerror(err));
    }
    struct stat by_fd {
    }, by_name{};
    if (::fstat(fd, &by_fd) == 0 && ::stat(path_.c_str(), &by_name) == 0 &&
        by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino) {
      fd_ = fd;
      break;
    }
    ::close(fd);
  }
  if (fd_ < 0) throw FatalError("cannot lock '" + path_.string() + "': it keeps being replaced");
  const std::string record = format::lock_record_text(format::this_process_lock_record(command));
  // Best effort: the record only informs a second writer; the lock is what excludes it.
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, record.data(), record.size(), 0);
  }
}

bool empty_but_lock(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename() != format::kLockFile) return false;
  return !ec;
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held, so nobody takes a lock on a file going away
  ::close(fd_);
}

}  // namespace tarmac
