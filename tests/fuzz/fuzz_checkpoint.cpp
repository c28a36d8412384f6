// libFuzzer target for checkpoint.json (format/checkpoint.h), which --resume, --overwrite,
// a dead run's clean-up and -o s3:// read back: any input parses or throws ParseError; what
// parses is written back (as the current version, sealed) and parses to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"
#include "format/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tarmac::format::Checkpoint c;
  try {
    c = tarmac::format::parse_checkpoint(text);
  } catch (const tarmac::ParseError&) {
    return 0;
  }
  const std::string again = tarmac::format::checkpoint_text(c);
  if (tarmac::format::checkpoint_text(tarmac::format::parse_checkpoint(again)) != again)
    __builtin_trap();
  return 0;
}
