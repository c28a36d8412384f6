// libFuzzer target for the zip central directory (source/zip_directory.h), read two ways: from
// memory, as preads read a zip file, and through RangedReadAt's fetches, as Range GETs read a
// remote zip (its tail size taken from the first byte, so that reads straddle the tail). Both
// parse alike, or both throw ParseError; nothing else is acceptable.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "source/zip_directory.h"

namespace {

bool same(const tarmac::ZipDirectory& a, const tarmac::ZipDirectory& b) {
  if (a.directory_offset != b.directory_offset || a.entries.size() != b.entries.size())
    return false;
  for (size_t i = 0; i < a.entries.size(); ++i) {
    const auto &x = a.entries[i], &y = b.entries[i];
    if (x.name != y.name || x.local_offset != y.local_offset ||
        x.compressed_size != y.compressed_size || x.size != y.size || x.crc32 != y.crc32 ||
        x.method != y.method || x.flags != y.flags || x.kind != y.kind)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t tail = 1 + static_cast<size_t>(data[0]) * 64;  // up to ~16 KiB
  const std::vector<uint8_t> file(data + 1, data + size);
  auto in_memory = [&](uint64_t offset, size_t n, uint8_t* out) {
    if (offset > file.size() || file.size() - offset < n) return false;
    if (n > 0) std::memcpy(out, file.data() + offset, n);
    return true;
  };
  tarmac::RangedReadAt ranged(
      [&](uint64_t offset, size_t n) {
        if (offset > file.size() || file.size() - offset < n) __builtin_trap();  // never asked
        return std::vector<uint8_t>(file.begin() + static_cast<ptrdiff_t>(offset),
                                    file.begin() + static_cast<ptrdiff_t>(offset + n));
      },
      file.size(), tail);
  tarmac::ZipDirectory a, b;
  bool a_ok = true, b_ok = true;
  try {
    a = tarmac::read_zip_directory(in_memory, file.size());
  } catch (const tarmac::ParseError&) {
    a_ok = false;
  }
  try {
    b = tarmac::read_zip_directory(
        [&ranged](uint64_t offset, size_t n, uint8_t* out) { return ranged(offset, n, out); },
        file.size());
  } catch (const tarmac::ParseError&) {
    b_ok = false;
  }
  if (a_ok != b_ok || (a_ok && !same(a, b))) __builtin_trap();
  return 0;
}
