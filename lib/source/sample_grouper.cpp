#include "source/sample_grouper.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace tarmac {
namespace {

constexpr uint32_t kDropped = 1u << 31;

}  // namespace

const char* on_duplicate_name(OnDuplicate d) {
  switch (d) {
    case OnDuplicate::First:
      return "first";
    case OnDuplicate::Last:
      return "last";
    case OnDuplicate::Error:
      break;
  }
  return "error";
}

std::string SampleGrouper::input_name(uint32_t index) const {
  if (index < o_.input_names.size()) return "'" + o_.input_names[index] + "'";
  return "input #" + std::to_string(index + 1);
}

void SampleGrouper::add(uint32_t input, Member&& m, const std::string& key,
                        std::vector<RawSample>& ready) {
  const uint32_t here = o_.first_input + input;
  const std::string policy =
      std::string(" (--on-duplicate ") + on_duplicate_name(o_.on_duplicate) + ")";
  auto it = pending_index_.find(key);
  if (it == pending_index_.end()) {
    RawSample s;
    s.key = key;
    s.input = input;
    const std::optional<uint32_t> done = released_.find(key);
    const bool done_kept = done && !(*done & kDropped);
    if (done_kept && *done == here)
      throw SampleError("member '" + m.name + "' belongs to sample '" + key +
                            "', which was already converted: the sample's members lie further "
                            "apart in the archive than --group-window; re-pack the archive with "
                            "its members sorted by name (tar --sort=name) or raise --group-window",
                        ErrorCode::LateMember);
    std::optional<uint32_t> kept;
    if (o_.kept)
      if (auto k = o_.kept->find(key); k && *k != here) kept = *k;
    if (!kept && done_kept) {
      if (o_.on_duplicate == OnDuplicate::First)
        kept = *done;
      else {  // a bad sample, reported once whatever the number of its members
        if (s.errors.empty()) s.error_code = ErrorCode::DuplicateKey;
        s.errors.push_back("duplicate key '" + key + "': member '" + m.name + "' of " +
                           input_name(here) + " repeats a sample already read from " +
                           input_name(*done) +
                           "; to keep one of them, use --on-duplicate first or last");
      }
    }
    if (kept) {
      s.dropped = true;
      s.duplicates.push_back(
          {"", *kept,
           "duplicate key '" + key + "': kept the one from " + input_name(*kept) + policy});
    }
    pending_.push_back(std::move(s));
    pending_sizes_.push_back(0);
    it = pending_index_.emplace(key, base_ + pending_.size() - 1).first;
  }
  RawSample& s = pending_[it->second - base_];
  uint64_t& size = pending_sizes_[it->second - base_];
  if (s.dropped) return;  // a duplicate left out: its members are not kept
  auto other = std::find_if(s.members.begin(), s.members.end(),
                            [&](const Member& o) { return o.name == m.name; });
  if (other != s.members.end()) {
    const std::string twice = "member '" + m.name + "' appears twice in the archive";
    switch (o_.on_duplicate) {
      case OnDuplicate::Error:
        if (s.errors.empty()) s.error_code = ErrorCode::DuplicateMember;
        s.errors.push_back(twice);
        return;
      case OnDuplicate::First:
        s.duplicates.push_back({m.name, here, twice + ": kept the first" + policy});
        return;
      case OnDuplicate::Last:
        // As if the first were not in the archive: the later one takes its place in order.
        s.duplicates.push_back({m.name, here, twice + ": kept the last" + policy});
        pending_bytes_ -= other->data.size();
        size -= other->data.size();
        s.members.erase(other);
        break;
    }
  }
  pending_bytes_ += m.data.size();
  size += m.data.size();
  s.members.push_back(std::move(m));
  while (pending_bytes_ > o_.window_bytes && pending_.size() > 1) release_oldest(ready);
}

void SampleGrouper::release_oldest(std::vector<RawSample>& ready) {
  RawSample& s = pending_.front();
  pending_bytes_ -= pending_sizes_.front();
  pending_sizes_.pop_front();
  pending_index_.erase(s.key);
  const uint32_t where = o_.first_input + s.input;
  // Never overwrite the entry of a sample kept from another input.
  const std::optional<uint32_t> before = released_.find(s.key);
  if (s.dropped || (before && !(*before & kDropped) && *before != where))
    released_.insert(s.key, where | kDropped);
  else
    released_.assign(s.key, where);
  ready.push_back(std::move(s));
  pending_.pop_front();
  ++base_;
}

std::vector<Member> SampleGrouper::lend_members(const std::string& key) {
  auto it = pending_index_.find(key);
  if (it == pending_index_.end()) return {};
  return std::exchange(pending_[it->second - base_].members, {});
}

void SampleGrouper::return_members(const std::string& key, std::vector<Member>&& members) {
  auto it = pending_index_.find(key);
  if (it != pending_index_.end()) pending_[it->second - base_].members = std::move(members);
}

void SampleGrouper::flush(std::vector<RawSample>& ready) {
  while (!pending_.empty()) release_oldest(ready);
}

}  // namespace tarmac
