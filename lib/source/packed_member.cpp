#include "source/packed_member.h"

#include <isa-l/igzip_lib.h>

#include <limits>
#include <memory>
#include <string>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/inflate_error.h"
#include "source/gzip_inflater.h"

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

// Inflates `in` (raw deflate) into exactly `size` bytes, or throws: it never writes past `size`,
// whatever the stream would give.
std::vector<uint8_t> inflate_exactly(const std::vector<uint8_t>& in, uint64_t size, uint32_t& crc) {
  if (in.size() > std::numeric_limits<uint32_t>::max() ||
      size > std::numeric_limits<uint32_t>::max())
    throw SampleError("zip member of " + format_bytes(size) +
                          " is too large to inflate in one piece (4 GiB at most)",
                      ErrorCode::UnsupportedMember);
  std::vector<uint8_t> out(size);
  auto s = std::make_unique<inflate_state>();
  isal_inflate_init(s.get());
  s->crc_flag = ISAL_GZIP_NO_HDR;                // the CRC-32 of the output, as zip's
  s->next_in = const_cast<uint8_t*>(in.data());  // ISA-L's API is not const; it only reads
  s->avail_in = static_cast<uint32_t>(in.size());
  s->next_out = out.data();
  s->avail_out = static_cast<uint32_t>(size);
  int r = isal_inflate(s.get());
  if (r < 0) throw corrupt(isal_error_text(r));
  if (s->block_state != ISAL_BLOCK_FINISH) {
    if (s->avail_out > 0)
      throw corrupt("its deflate data ends after " + std::to_string(size - s->avail_out) +
                    " of the " + std::to_string(size) + " bytes its central directory declares");
    // The declared size is reached and the stream goes on: one more byte says whether it holds
    // more (a corrupt member, or a zip bomb), without inflating it any further.
    uint8_t extra = 0;
    s->next_out = &extra;
    s->avail_out = 1;
    r = isal_inflate(s.get());
    if (r < 0) throw corrupt(isal_error_text(r));
    if (s->avail_out == 0)
      throw corrupt("it inflates past the " + std::to_string(size) +
                    " bytes its central directory declares (a damaged member or a zip bomb); "
                    "it was not inflated further");
    if (s->block_state != ISAL_BLOCK_FINISH) throw corrupt("its deflate data is cut short");
  } else if (s->avail_out > 0) {
    throw corrupt("it inflates to " + std::to_string(size - s->avail_out) +
                  " bytes, its central directory declares " + std::to_string(size));
  }
  crc = s->crc;
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
