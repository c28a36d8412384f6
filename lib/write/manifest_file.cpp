#include "write/manifest_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "format/json_object.h"
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

std::string sealed_manifest_text(nlohmann::ordered_json manifest) {
  static constexpr std::string_view kField = "\"manifest_crc32\": \"";
  manifest.erase("manifest_crc32");
  manifest["manifest_crc32"] = "00000000";
  std::string text = manifest.dump(2) + "\n";
  const size_t at = text.rfind(kField) + kField.size();
  text.replace(at, 8, crc32_hex(crc32_update(0, text.data(), text.size())));
  return text;
}

bool update_manifest(const std::filesystem::path& dir,
                     const std::function<void(nlohmann::ordered_json&)>& edit) {
  const std::filesystem::path path = dir / format::kManifestFile;
  std::ifstream in(path);
  if (!in) return false;
  nlohmann::ordered_json m = format::parse_ordered(in, false);
  if (!m.is_object())
    throw FatalError("cannot update '" + path.string() +
                     "': it is not a JSON object (run 'tarmac verify " + dir.string() + "')");
  edit(m);
  write_file_atomic(path.string(), sealed_manifest_text(std::move(m)));
  return true;
}

}  // namespace tarmac
