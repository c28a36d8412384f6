// libFuzzer target for S3 listings (remote/inputs.h), the XML a server answers ListObjectsV2
// with: any input parses or throws ParseError, and a truncated page always has its token.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.h"
#include "remote/inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tarmac::remote::ListPage page = tarmac::remote::parse_list_page(
        std::string_view(reinterpret_cast<const char*>(data), size));
    if (page.truncated && page.next_token.empty()) __builtin_trap();
  } catch (const tarmac::ParseError&) {
  }
  return 0;
}
