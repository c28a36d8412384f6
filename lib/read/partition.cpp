#include "read/partition.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace tarmac {

uint64_t partition_size(uint64_t n, const PartitionOptions& o) {
  if (o.world == 0) throw ArgumentError("world size must be at least 1");
  if (o.rank >= o.world)
    throw ArgumentError("rank " + std::to_string(o.rank) + " is not below world size " +
                        std::to_string(o.world));
  return o.drop_last ? n / o.world : n / o.world + (n % o.world != 0);
}

std::vector<int64_t> partition_indices(uint64_t n, const PartitionOptions& o) {
  const uint64_t per_rank = partition_size(n, o);
  std::vector<int64_t> order(n);
  for (uint64_t k = 0; k < n; ++k) order[k] = static_cast<int64_t>(k);
  if (o.shuffle && n > 1) {
    // One stream per (seed, epoch): the epoch is mixed through splitmix64 once, so that
    // neighbouring seeds and epochs give unrelated permutations.
    SplitMix64 rng(SplitMix64(o.seed).next() ^ SplitMix64(~o.epoch).next());
    for (uint64_t k = n - 1; k > 0; --k) std::swap(order[k], order[rng.below(k + 1)]);
  }
  std::vector<int64_t> out;
  out.reserve(per_rank);
  for (uint64_t j = 0; j < per_rank; ++j) out.push_back(order[(o.rank + j * o.world) % n]);
  return out;
}

}  // namespace tarmac
