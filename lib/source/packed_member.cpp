#include "source/packed_member.h"

#include <libdeflate.h>

#include <limits>
#include <memory>
#include <new>
#include <string>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"

namespace tarmac {
namespace {

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

SampleError corrupt(const std::string& why) {
  return SampleError("zip member is corrupt: " + why + "; copy or download the archive again",
                     ErrorCode::CorruptMember);
}

void check_crc(uint32_t got, uint32_t declared) {
  if (got != declared)
    throw corrupt("its CRC-32 is " + hex32(got) + ", its central directory says " +
                  hex32(declared));
}

struct FreeDecompressor {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

// Inflates `in` (raw deflate) into exactly `size` bytes, or throws: it never writes past `size`,
// whatever the stream would give. libdeflate inflates a whole buffer ~1.2x as fast as ISA-L's
// stateful inflate on JPEG members (docs/performance.md, zip); ISA-L's CRC-32 then folds the
// output at ~10 GB/s.
std::vector<uint8_t> inflate_exactly(const std::vector<uint8_t>& in, uint64_t size, uint32_t& crc) {
  if (in.size() > std::numeric_limits<uint32_t>::max() ||
      size > std::numeric_limits<uint32_t>::max())
    throw SampleError("zip member of " + format_bytes(size) +
                          " is too large to inflate in one piece (4 GiB at most)",
                      ErrorCode::UnsupportedMember);
  thread_local std::unique_ptr<libdeflate_decompressor, FreeDecompressor> d(
      libdeflate_alloc_decompressor());
  if (!d) throw std::bad_alloc();
  std::vector<uint8_t> out(size);
  uint8_t none = 0;  // an empty member's output needs a valid pointer
  size_t used = 0, got = 0;
  const libdeflate_result r = libdeflate_deflate_decompress_ex(
      d.get(), in.data(), in.size(), size ? out.data() : &none, size, &used, &got);
  if (r == LIBDEFLATE_INSUFFICIENT_SPACE)
    throw corrupt("it inflates past the " + std::to_string(size) +
                  " bytes its central directory declares (a damaged member or a zip bomb); "
                  "it was not inflated further");
  if (r != LIBDEFLATE_SUCCESS) throw corrupt("its deflate data is invalid or cut short");
  if (got != size)
    throw corrupt("it inflates to " + std::to_string(got) +
                  " bytes, its central directory declares " + std::to_string(size));
  crc = crc32_update(0, out.data(), out.size());
  return out;
}

}  // namespace

const Member& unpack_member(const Member& m, Member& scratch) {
  switch (m.packing) {
    case Packing::Plain:
      return m;
    case Packing::ZipRefused:
      throw SampleError(m.refused, ErrorCode::UnsupportedMember);
    case Packing::ZipStored:
      if (m.data.size() != m.size)
        throw corrupt("it holds " + std::to_string(m.data.size()) +
                      " bytes, its central directory declares " + std::to_string(m.size));
      check_crc(crc32_update(0, m.data.data(), m.data.size()), m.crc32);
      return m;
    case Packing::ZipDeflated:
      break;
  }
  uint32_t crc = 0;
  scratch.data = inflate_exactly(m.data, m.size, crc);
  check_crc(crc, m.crc32);
  scratch.name = m.name;
  scratch.packing = Packing::Plain;
  return scratch;
}

}  // namespace tarmac
