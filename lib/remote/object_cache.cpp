#include "remote/object_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "remote/fetch.h"
#include "remote/http.h"
#include "remote/url.h"

namespace tarmac::remote {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLockSuffix = ".lock";
constexpr const char* kPartTag = ".part-";  // NAME.part-PID-TID: a download in flight

// An open file locked with flock(); unlocked and closed when it goes out of scope.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw FatalError("cannot create lock file '" + path + "': " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        ::close(fd_);
        throw FatalError("cannot lock '" + path + "': " + std::strerror(errno));
      }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

bool is_object_file(const std::string& name) {
  return !name.ends_with(kLockSuffix) && name.find(kPartTag) == std::string::npos;
}

std::string hex(uint32_t v) {
  return crc32_hex(v);
}

}  // namespace

std::optional<uint32_t> file_crc32(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<uint8_t> buf(1 << 20);
  uint32_t crc = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    crc = crc32_update(crc, buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return crc;
}

ObjectCache::ObjectCache(std::string dir, uint64_t max_bytes, RemoteConfig config)
    : dir_(std::move(dir)), max_bytes_(max_bytes), config_(std::move(config)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_))
    throw FatalError("cannot create the cache folder '" + dir_ + "': " + ec.message());
}

std::string ObjectCache::local_path(const std::string& url) const {
  std::string rest;
  if (is_s3(url)) {
    const S3Location loc = parse_s3(url);
    rest = loc.bucket + "/" + loc.key;
  } else if (url.starts_with("https://") || url.starts_with("http://")) {
    rest = url.substr(url.find("//") + 2);
    rest = rest.substr(0, rest.find_first_of("?#"));
  } else {
    throw ParseError("'" + url + "' is not an s3:// or http(s):// name");
  }
  for (size_t b = 0;;) {
    const size_t e = rest.find('/', b);
    const std::string part = rest.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (part.empty() || part == "." || part == "..")
      throw ParseError("'" + url +
                       "' has an empty, '.' or '..' path component: it cannot be "
                       "kept in a cache folder");
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return (fs::path(dir_) / rest).string();
}

std::string ObjectCache::fetch(const std::string& url, std::optional<uint32_t> crc32) {
  const std::string path = local_path(url);
  const auto good = [&]() { return crc32 && file_crc32(path) == crc32; };
  std::error_code ec;
  if (!good()) {
    fs::create_directories(fs::path(path).parent_path(), ec);
    const fs::path p(path);  // its lock: .NAME.lock beside it
    FileLock lock((p.parent_path() / ("." + p.filename().string() + kLockSuffix)).string());
    if (!good()) {  // another process may have fetched it while this one waited
      const std::string part =
          path + kPartTag + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
      try {
        const Downloaded d = download_to_file(target_for(url, config_), config_, part);
        if (crc32 && d.crc32 != *crc32)
          throw RemoteError("'" + url + "' has CRC-32 " + hex(d.crc32) + " (" +
                            std::to_string(d.size) + " bytes) but its dataset records " +
                            hex(*crc32) +
                            ": the object was changed after the dataset was written; run "
                            "tarmac verify on the dataset");
        if (::rename(part.c_str(), path.c_str()) != 0)
          throw FatalError("cannot rename '" + part + "' to '" + path +
                           "': " + std::strerror(errno));
      } catch (...) {
        fs::remove(part, ec);
        throw;
      }
    }
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // the least recently used go first
  if (max_bytes_ > 0) evict(path);
  return path;
}

void ObjectCache::evict(const std::string& keep) {
  FileLock lock((fs::path(dir_) / (std::string(".cache") + kLockSuffix)).string());
  struct Entry {
    fs::file_time_type time;
    uint64_t size;
    fs::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || !is_object_file(it->path().filename().string())) continue;
    const uint64_t size = it->file_size(ec);
    if (ec) continue;
    entries.push_back({it->last_write_time(ec), size, it->path()});
    total += size;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (e.path == fs::path(keep)) continue;
    // A process that has the file mapped keeps reading it: unlinking frees it when unmapped.
    if (fs::remove(e.path, ec)) total -= e.size;
  }
}

}  // namespace tarmac::remote
