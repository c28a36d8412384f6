#include "source/gzip_inflater.h"

#include <isa-l/igzip_lib.h>

#include <string>

#include "common/error.h"
#include "common/inflate_error.h"

namespace tarmac {

GzipInflater::GzipInflater() : state_(std::make_unique<inflate_state>()) {
  isal_inflate_init(state_.get());
  state_->crc_flag = ISAL_GZIP;
}

GzipInflater::~GzipInflater() = default;

bool GzipInflater::starts_gzip(const uint8_t* p, size_t n) {
  return n >= 3 && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8;
}

void GzipInflater::feed(const uint8_t* data, size_t size) {
  state_->next_in = const_cast<uint8_t*>(data);  // ISA-L's API is not const; it only reads
  state_->avail_in = static_cast<uint32_t>(size);
}

size_t GzipInflater::read(uint8_t* out, size_t size, bool end_of_input) {
  inflate_state& s = *state_;
  while (true) {
    if (between_members_) {
      while (s.avail_in > 0 && *s.next_in == 0) {  // padding after a member (tape blocks)
        ++s.next_in;
        --s.avail_in;
      }
      if (s.avail_in == 0) return 0;  // more input, or the end
      if (*s.next_in != 0x1f)
        throw ParseError("data after the end of the gzip stream is not another gzip member");
      uint8_t* in = s.next_in;
      const uint32_t avail = s.avail_in;
      isal_inflate_reset(&s);
      s.crc_flag = ISAL_GZIP;
      s.next_in = in;
      s.avail_in = avail;
      between_members_ = false;
    }
    const uint32_t in_before = s.avail_in;
    s.next_out = out;
    s.avail_out = static_cast<uint32_t>(size);
    const int r = isal_inflate(&s);
    if (r < 0) throw ParseError("gzip data is corrupt: " + isal_error_text(r));
    const size_t n = size - s.avail_out;
    if (s.block_state == ISAL_BLOCK_FINISH) between_members_ = true;
    if (n > 0) return n;
    if (!between_members_ && s.avail_in == 0) {
      if (end_of_input) throw ParseError("the gzip stream is truncated");
      return 0;
    }
    if (!between_members_ && s.avail_in == in_before)
      throw ParseError("gzip data is corrupt: inflate made no progress");
  }
}

}  // namespace tarmac
