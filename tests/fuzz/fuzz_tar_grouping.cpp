// libFuzzer target: arbitrary bytes read as an archive (any format and filter libarchive
// knows, and zip files through their central directory) by InputReader, members grouped into
// samples by SampleGrouper and unpacked (a zip member inflated and checked) as the workers do.
// The only acceptable failures are FatalError (unusable archive) and SampleError (bad member).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "source/input_reader.h"
#include "source/member.h"
#include "source/packed_member.h"
#include "source/sample_grouper.h"

namespace {

// The archive lives in a memfd, so the reader sees a regular, seekable file (the zip
// central-directory path included) without touching the disk on every run.
int archive_fd() {
  static const int fd = ::memfd_create("fuzz-archive", MFD_CLOEXEC);
  return fd;
}

constexpr uint64_t kMaxMember = 1 << 20;  // keeps declared sizes and gzip bombs small
constexpr uint64_t kWindow = 4096;        // small, so that samples leave the window often

void check(const tarmac::RawSample& s) {
  if (s.key.empty() || (s.members.empty() && s.errors.empty())) __builtin_trap();
  for (const auto& m : s.members) {
    std::string key, ext;
    if (m.data.size() > kMaxMember + kMaxMember / 8 + 1024 ||
        !tarmac::split_member_name(m.name, key, ext) || key != s.key)
      __builtin_trap();
    try {
      tarmac::Member scratch;
      const tarmac::Member& u = tarmac::unpack_member(m, scratch);
      if (u.data.size() > kMaxMember || (tarmac::is_packed(m) && u.data.size() != m.size))
        __builtin_trap();
    } catch (const tarmac::SampleError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = archive_fd();
  if (fd < 0 || ::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    __builtin_trap();
  tarmac::InputReaderOptions options;
  options.max_member_size = kMaxMember;
  // Alternate strict and skip mode on a bit of the input, so that both error paths run.
  options.skip_errors = size > 0 && (data[size - 1] & 1);
  try {
    tarmac::InputReader reader({"/proc/self/fd/" + std::to_string(fd)}, options);
    tarmac::SampleGrouper grouper(kWindow);
    std::vector<tarmac::RawSample> ready;
    tarmac::InputCallbacks cb;
    cb.on_member = [&](uint32_t input, tarmac::Member&& m) {
      std::string key, ext;
      if (!tarmac::split_member_name(m.name, key, ext)) return;
      try {
        grouper.add(input, std::move(m), key, ready);
      } catch (const tarmac::SampleError&) {
      }
    };
    cb.on_notice = [](tarmac::MemberNotice&&) {};
    cb.on_input_end = [&](uint32_t) { grouper.flush(ready); };
    reader.run(cb);
    for (const auto& s : ready) check(s);
    if (grouper.pending_bytes() != 0) __builtin_trap();
  } catch (const tarmac::FatalError&) {
  }
  return 0;
}
