#pragma once
// Groups members into samples by key. Members of one sample need not be adjacent in the
// archive: samples wait in memory, in order of first appearance, until the bytes waiting
// pass the group window; then the oldest are released. A member that arrives for a sample
// already released is an error (its sample was further apart than the window), as is a key
// seen in two inputs. Memory is bounded by the window plus one member.
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "source/member.h"

namespace tarmac {

class SampleGrouper {
 public:
  explicit SampleGrouper(uint64_t window_bytes) : window_(window_bytes) {}

  /// Adds a member of input `input`; appends samples that leave the window to `ready`.
  /// Members whose name has no key/extension must be filtered out by the caller.
  /// Throws SampleError for a member arriving after its sample left, or a duplicate key.
  void add(uint32_t input, Member&& m, const std::string& key, std::vector<RawSample>& ready);

  /// Releases every sample still waiting (call at the end of each input).
  void flush(std::vector<RawSample>& ready);

  uint64_t pending_bytes() const { return pending_bytes_; }

 private:
  void release_oldest(std::vector<RawSample>& ready);

  uint64_t window_;
  uint64_t pending_bytes_ = 0;
  std::deque<RawSample> pending_;
  std::unordered_map<std::string, size_t> pending_index_;  // key -> position + base_
  size_t base_ = 0;  // number of samples popped from the front of pending_
  // Keys released so far, by a 64-bit hash -> input index; 16 bytes a sample.
  std::unordered_map<uint64_t, uint32_t> released_;
};

/// 64-bit FNV-1a: a stable hash for keys (stable across runs and machines).
uint64_t key_hash(const std::string& key);

}  // namespace tarmac
