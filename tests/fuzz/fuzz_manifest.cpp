// libFuzzer target for manifest.json (format/manifest.h), which verify, info, merge, column
// merge/rm, --overwrite and a dead run's clean-up parse: any input parses or throws
// ParseError; what parses is written back and parses to the same manifest; its counts are
// checked and its seal read without a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.h"
#include "format/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)tarmac::format::check_seal(text);
  tarmac::format::Manifest m;
  try {
    m = tarmac::format::parse_manifest(text);
  } catch (const tarmac::ParseError&) {
    return 0;
  }
  (void)tarmac::format::count_problems(m);
  (void)tarmac::format::manifest_shard_names(m);
  const nlohmann::ordered_json j = tarmac::format::to_json(m);
  const tarmac::format::Manifest again = tarmac::format::parse_manifest(j.dump());
  if (tarmac::format::to_json(again) != j) __builtin_trap();
  return 0;
}
