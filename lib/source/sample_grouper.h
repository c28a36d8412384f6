#pragma once
// Groups members into samples by key. Members of one sample need not be adjacent in the
// archive: samples wait in memory, in order of first appearance, until the bytes waiting
// pass the group window; then the oldest are released. A member that arrives for a sample
// already released is an error (its sample was further apart than the window). A key seen in
// two inputs, or a member name repeated within a sample, is a duplicate: an error, or under
// OnDuplicate::First/Last the one not kept is left out and noted on the released sample.
// Memory is bounded by the window plus one member, and the released keys' fingerprints.
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "source/key_set.h"
#include "source/member.h"

namespace tarmac {

/// --on-duplicate: what to do with a key that occurs twice.
enum class OnDuplicate { Error, First, Last };

/// "error", "first" or "last".
const char* on_duplicate_name(OnDuplicate d);

struct GrouperOptions {
  uint64_t window_bytes = 64ull << 20;
  OnDuplicate on_duplicate = OnDuplicate::Error;
  /// Every input of the run, for messages ("input #N" when empty).
  std::vector<std::string> input_names;
  /// Index in input_names of the grouper's input 0 (a --shard part reading a block of inputs).
  uint32_t first_input = 0;
  /// Keys whose kept sample was chosen before grouping (scan_kept_keys), with the index in
  /// input_names of the input it is kept from; a sample of such a key read from any other input
  /// is left out. Needed for OnDuplicate::Last; must outlive the grouper.
  const KeySet* kept = nullptr;
};

class SampleGrouper {
 public:
  explicit SampleGrouper(uint64_t window_bytes) { o_.window_bytes = window_bytes; }
  explicit SampleGrouper(GrouperOptions options) : o_(std::move(options)) {}

  /// Adds a member of input `input`; appends samples that leave the window to `ready`.
  /// Members whose name has no key/extension must be filtered out by the caller.
  /// Throws SampleError for a member arriving after its sample left. A key already read from
  /// another input is, under OnDuplicate::Error, a sample released with an error.
  void add(uint32_t input, Member&& m, const std::string& key, std::vector<RawSample>& ready);

  /// Releases every sample still waiting (call at the end of each input).
  void flush(std::vector<RawSample>& ready);

  uint64_t pending_bytes() const { return pending_bytes_; }
  /// Samples waiting in the window.
  size_t pending_samples() const { return pending_index_.size(); }
  /// The sample of `key` still waiting in the window, or null (released, or never seen). Valid
  /// until the next add() or flush().
  const RawSample* find_pending(const std::string& key) const {
    auto it = pending_index_.find(key);
    return it == pending_index_.end() ? nullptr : &pending_[it->second - base_];
  }
  /// Moves the members of the waiting sample `key` out (to be processed ahead of its release);
  /// the window still counts their bytes. Give them back with return_members before adding a
  /// member to that sample; a sample released while lent comes out without members.
  std::vector<Member> lend_members(const std::string& key);
  void return_members(const std::string& key, std::vector<Member>&& members);
  /// Bytes held by the fingerprints of released keys.
  size_t released_memory_bytes() const { return released_.memory_bytes(); }

 private:
  void release_oldest(std::vector<RawSample>& ready);
  std::string input_name(uint32_t index) const;  // index into input_names

  GrouperOptions o_;
  uint64_t pending_bytes_ = 0;
  std::deque<RawSample> pending_;
  std::deque<uint64_t> pending_sizes_;  // member bytes of each waiting sample, lent or not
  std::unordered_map<std::string, size_t> pending_index_;  // key -> position + base_
  size_t base_ = 0;  // number of samples popped from the front of pending_
  // Keys released so far -> index in input_names of their input, with kDropped set for a
  // sample left out as a duplicate.
  KeySet released_;
};

}  // namespace tarmac
