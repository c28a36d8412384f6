#include "common/inflate_error.h"

#include <isa-l/igzip_lib.h>

namespace tarmac {

std::string isal_error_text(int code) {
  switch (code) {
    case ISAL_INVALID_BLOCK:
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER:
      return "invalid gzip header or trailer";
    case ISAL_UNSUPPORTED_METHOD:
      return "compression method is not deflate";
    case ISAL_INCORRECT_CHECKSUM:
      return "CRC-32 or length check failed";
    default:
      return "inflate error " + std::to_string(code);
  }
}

}  // namespace tarmac
