#include "write/manifest_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "format/names.h"
#include "write/file_util.h"

namespace tarmac {

uint32_t file_crc32(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io_error("cannot open", path, errno);
  std::vector<uint8_t> buf(size_t{4} << 20);
  uint32_t crc = 0;
  off_t at = 0;
  while (true) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw_io_error("cannot read", path, err);
    }
    if (n == 0) break;
    crc = crc32_update(crc, buf.data(), static_cast<size_t>(n));
    at += n;
  }
  ::close(fd);
  return crc;
}

bool update_manifest(const std::filesystem::path& dir,
                     const std::function<void(format::Manifest&)>& edit) {
  const std::filesystem::path path = dir / format::kManifestFile;
  std::optional<format::Manifest> m;
  try {
    m = format::read_manifest(dir);
  } catch (const ParseError& e) {
    throw FatalError("cannot update '" + path.string() + "': " + e.what() +
                     " (run 'tarmac verify " + dir.string() + "')");
  }
  if (!m) return false;
  edit(*m);
  write_file_atomic(path.string(), format::sealed_manifest_text(*m));
  return true;
}

}  // namespace tarmac
