#pragma once
// The shard list (docs/format.md 7): `shardlist.json`, WebDataset's indexed reader's (wids)
// dataset description, so that `wids.ShardListDataset("out/shardlist.json")` opens a tarmac
// dataset's shards as they are. Written by convert and merge, checked by verify.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tarmac::format {

inline constexpr const char* kShardListFile = "shardlist.json";
/// The `__kind__` entry wids' own index tool writes; wids reads `wids_version` 1.
inline constexpr std::string_view kShardListKind = "wids-shard-index-v1";

struct ShardListEntry {
  std::string url;        ///< the shard's file name, relative to the list's folder
  uint64_t nsamples = 0;  ///< samples (distinct keys) in the shard
  uint64_t filesize = 0;  ///< bytes of the shard file
};

struct ShardList {
  /// wids' `name` (informative; written only when not empty: tarmac writes none, so that a
  /// dataset's bytes do not depend on its folder's name).
  std::string name;
  std::vector<ShardListEntry> shards;
};

/// The JSON text of `list`, as wids reads it.
std::string shard_list_text(const ShardList& list);
/// Parses a shard list and checks it: `__kind__`, `wids_version` 1, every entry a `url`
/// string and unsigned `nsamples` (and `filesize`, optional). Throws ParseError saying what.
ShardList parse_shard_list(std::string_view text);

}  // namespace tarmac::format
