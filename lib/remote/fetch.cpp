#include "remote/fetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"

namespace tarmac::remote {
namespace {

constexpr size_t kChunk = 1 << 20;

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw FatalError("cannot write '" + path + "': " + std::strerror(errno) +
                       " (is the disk full?)");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

Downloaded download_to_file(const Target& target, const RemoteConfig& config,
                            const std::string& path, const StopRequest* stop) {
  Fd out;
  out.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out.fd < 0) throw FatalError("cannot create '" + path + "': " + std::strerror(errno));
  HttpStream in(target, config, stop);
  std::vector<uint8_t> buf(kChunk);
  Downloaded d;
  for (size_t n; (n = in.read(buf.data(), buf.size())) > 0;) {
    d.crc32 = crc32_update(d.crc32, buf.data(), n);
    write_all(out.fd, buf.data(), n, path);
    d.size += n;
  }
  if (::close(out.fd) != 0) {
    out.fd = -1;
    throw FatalError("cannot write '" + path + "': " + std::strerror(errno));
  }
  out.fd = -1;
  d.counts = in.counts();
  return d;
}

std::vector<uint8_t> download_to_memory(const Target& target, const RemoteConfig& config,
                                        uint64_t limit, const StopRequest* stop,
                                        std::optional<uint64_t> declared) {
  const auto over = [&](const std::string& size) {
    return RemoteError("cannot read '" + target.name + "': it holds " + size +
                       ", over the limit of " + format_bytes(limit));
  };
  HttpStream in(target, config, stop);
  if (declared) in.expect_size(*declared);
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(kChunk);
  for (size_t n; (n = in.read(buf.data(), buf.size())) > 0;) {
    if (const auto size = in.size(); size && *size > limit) throw over(format_bytes(*size));
    if (out.size() + n > limit) throw over("more");  // a size the server did not say
    if (out.empty() && in.size()) out.reserve(static_cast<size_t>(*in.size()));
    out.insert(out.end(), buf.data(), buf.data() + n);
  }
  return out;
}

std::string get_range(const Target& target, const RemoteConfig& config, uint64_t offset,
                      uint64_t size) {
  if (size == 0) return "";
  const Response r = request(target, config, false, "", size + 1,
                             std::to_string(offset) + "-" + std::to_string(offset + size - 1));
  // 206 with the bytes asked for; a server that ignores Range answers 200 with all of it,
  // which the body limit above refuses.
  if (r.status != 206 || r.body.size() != size)
    throw RemoteError("cannot read '" + target.name + "': asked for " + std::to_string(size) +
                      " byte(s) at " + std::to_string(offset) + ", the server answered HTTP " +
                      std::to_string(r.status) + " with " + std::to_string(r.body.size()) +
                      ": the object is shorter than the dataset says; run tarmac verify on it");
  return r.body;
}

std::optional<std::string> get_if_exists(const Target& target, const RemoteConfig& config,
                                         size_t limit) {
  try {
    return request(target, config, false, "", limit).body;
  } catch (const RemoteError& e) {
    if (e.http_status() == 404) return std::nullopt;
    throw;
  }
}

}  // namespace tarmac::remote
