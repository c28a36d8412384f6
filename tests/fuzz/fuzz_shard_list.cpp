// libFuzzer target for the shard list (shardlist.json, format/shard_list.h), which verify
// parses: any input parses or throws ParseError, and what parses prints back to the same list.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.h"
#include "format/shard_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tarmac::format::ShardList l;
  try {
    l = tarmac::format::parse_shard_list(
        std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const tarmac::ParseError&) {
    return 0;
  }
  const tarmac::format::ShardList again =
      tarmac::format::parse_shard_list(tarmac::format::shard_list_text(l));
  if (again.name != l.name || again.shards.size() != l.shards.size()) __builtin_trap();
  for (size_t k = 0; k < l.shards.size(); ++k)
    if (again.shards[k].url != l.shards[k].url ||
        again.shards[k].nsamples != l.shards[k].nsamples ||
        again.shards[k].filesize != l.shards[k].filesize)
      __builtin_trap();
  return 0;
}
