#include "write/manifest_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "write/file_util.h"

namespace tarmac {

uint32_t file_crc32(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io_error("cannot open", path, errno);
  std::vector<uint8_t> buf(size_t{4} << 20);
  uLong crc = ::crc32(0, nullptr, 0);
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
    crc = ::crc32(crc, buf.data(), static_cast<uInt>(n));
    at += n;
  }
  ::close(fd);
  return static_cast<uint32_t>(crc);
}

std::string crc32_hex(uint32_t crc) {
  char b[16];
  std::snprintf(b, sizeof b, "%08x", crc);
  return b;
}

std::string sealed_manifest_text(nlohmann::ordered_json manifest) {
  static constexpr std::string_view kField = "\"manifest_crc32\": \"";
  manifest.erase("manifest_crc32");
  manifest["manifest_crc32"] = "00000000";
  std::string text = manifest.dump(2) + "\n";
  const size_t at = text.rfind(kField) + kField.size();
  const uLong crc = ::crc32(::crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(text.data()),
                            static_cast<uInt>(text.size()));
  text.replace(at, 8, crc32_hex(static_cast<uint32_t>(crc)));
  return text;
}

}  // namespace tarmac
