#pragma once
// Deterministic per-epoch sample order for distributed training. The permutation is
// computed with a fixed algorithm (splitmix64 + Fisher-Yates with rejection sampling), never
// with std::shuffle or std::uniform_int_distribution, whose results are implementation-defined:
// every rank on every machine and every language binding gets the same order.
#include <cstdint>
#include <vector>

#include "common/error.h"

namespace tarmac {

struct PartitionOptions {
  uint64_t rank = 0;
  uint64_t world = 1;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  bool shuffle = true;
  bool drop_last = false;  ///< drop the remainder instead of padding by repetition
};

/// The number of indices each rank gets for n samples: ceil(n / world), or floor with
/// drop_last. Throws ArgumentError when world is 0 or rank >= world.
uint64_t partition_size(uint64_t n, const PartitionOptions& o);

/// Rank `o.rank`'s share of epoch `o.epoch`'s order of n samples: position rank, rank+world,
/// ... of the (shuffled) order, padded cyclically from its start to a multiple of world
/// (or cut to one with drop_last). All ranks get equal-length, disjoint shares (disjoint up
/// to the padding); identical on every machine.
std::vector<int64_t> partition_indices(uint64_t n, const PartitionOptions& o);

/// The splitmix64 generator (Steele, Lea, Flood 2014), the PRNG of partition_indices.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, bound), bound > 0, by rejection (no modulo bias).
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace tarmac
