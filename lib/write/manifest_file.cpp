#include "write/manifest_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
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

std::string verified_labels_crc32(const std::filesystem::path& dir, const std::string& what) {
  const std::string where = what + " '" + dir.string() + "'";
  const std::string fix = " (run 'tarmac verify " + dir.string() + "')";
  const std::filesystem::path labels = dir / format::kLabelsFile;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(labels, ec))
    throw FatalError(where + " holds no dataset (no " + format::kLabelsFile + ")");
  std::optional<format::Manifest> m;
  const std::filesystem::path manifest = dir / format::kManifestFile;
  if (std::filesystem::exists(manifest, ec)) {
    std::ifstream in(manifest, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) throw FatalError(where + ": cannot read " + manifest.string() + fix);
    const std::string text = ss.str();
    const format::ManifestSeal seal = format::check_seal(text);
    if (seal.state != format::ManifestSeal::State::Good)
      throw FatalError(where + ": " + manifest.string() + " " +
                       (seal.state == format::ManifestSeal::State::Wrong
                            ? "was changed after it was written (its CRC-32 is " + seal.computed +
                                  ", its manifest_crc32 seal says " + seal.said + ")"
                            : std::string("has no well-formed manifest_crc32 seal")) +
                       "; nothing of it was used" + fix);
    try {
      m = format::parse_manifest(text);
    } catch (const ParseError& e) {
      throw FatalError(where + ": " + manifest.string() + ": " + e.what() + fix);
    }
  }
  const std::string crc = crc32_hex(file_crc32(labels.string()));
  if (m && m->labels_crc32.value_or(crc) != crc)
    throw FatalError(where + ": " + labels.string() + " is not the file its manifest records " +
                     "(its CRC-32 is " + crc + ", the manifest's labels_crc32 says " +
                     *m->labels_crc32 + "): it was damaged or replaced; nothing of it was used" +
                     fix);
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
