#include "check/dataset_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "read/cached_dataset.h"
#include "remote/fetch.h"
#include "remote/http.h"
#include "remote/object_cache.h"
#include "remote/url.h"

namespace tarmac::check {
namespace fs = std::filesystem;

DatasetSource::DatasetSource(const std::string& name) : name_(name), dir_(name) {
  remote_ = remote::is_remote(name);
  if (!remote_) return;
  config_ = remote::RemoteConfig::from_environment();
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (fs::path(tmp && *tmp ? tmp : "/tmp") / "tarmac-remote-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw FatalError("cannot create a temporary folder '" + pattern + "' for '" + name +
                     "': " + std::strerror(errno) + " (set TMPDIR to a writable folder)");
  const std::string tmp_dir = pattern;
  try {
    // Without CRC-32s: verify compares what is there with the manifest itself.
    remote::ObjectCache cache(tmp_dir, 0, config_);
    RemoteDatasetFiles f = fetch_dataset_files(cache, name, false);
    name_ = f.url;
    dir_ = f.dir;
    manifest_ = std::move(f.manifest);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);
    throw;
  }
  dir_root_ = tmp_dir;
}

DatasetSource::~DatasetSource() {
  if (dir_root_.empty()) return;
  std::error_code ec;
  fs::remove_all(dir_root_, ec);
}

std::string DatasetSource::location(const std::string& file) const {
  return remote_ ? name_ + file : (fs::path(dir_) / file).string();
}

std::vector<uint8_t> DatasetSource::read_range(const std::string& file, uint64_t offset,
                                               uint64_t size) const {
  if (remote_) {
    const std::string bytes =
        remote::get_range(remote::target_for(location(file), config_), config_, offset, size);
    return {bytes.begin(), bytes.end()};
  }
  const std::string path = location(file);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FatalError("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> out(static_cast<size_t>(size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw FatalError("'" + path + "' ends before byte " + std::to_string(offset + size) +
                       " (truncated?)");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

uint64_t DatasetSource::download(const std::string& file) const {
  if (!remote_) return 0;
  return remote::download_to_file(remote::target_for(location(file), config_), config_,
                                  (fs::path(dir_) / file).string())
      .size;
}

void DatasetSource::discard(const std::string& file) const {
  if (!remote_) return;
  std::error_code ec;
  fs::remove(fs::path(dir_) / file, ec);
}

DatasetSummary summarize_source(const DatasetSource& src, bool image_sizes) {
  DatasetSummary s = summarize_dataset(src.dir(), image_sizes);
  if (!src.remote()) return s;
  s.path = src.name();
  const auto& shards = src.manifest()->shards;
  for (auto& sh : s.shards)
    for (const auto& e : shards ? *shards : std::vector<format::ManifestShard>())
      if (e.name == sh.name) sh.size = e.size, sh.present = true;
  return s;
}

}  // namespace tarmac::check
