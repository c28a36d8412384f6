#include "source/sample_grouper.h"

#include "common/error.h"

namespace tarmac {

uint64_t key_hash(const std::string& key) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void SampleGrouper::add(uint32_t input, Member&& m, const std::string& key,
                        std::vector<RawSample>& ready) {
  auto it = pending_index_.find(key);
  if (it == pending_index_.end()) {
    if (auto done = released_.find(key_hash(key)); done != released_.end()) {
      if (done->second == input)
        throw SampleError("member '" + m.name + "' belongs to sample '" + key +
                          "', which was already converted: the sample's members lie further "
                          "apart in the archive than --group-window; re-pack the archive with "
                          "its members sorted by name (tar --sort=name) or raise --group-window");
      throw SampleError("duplicate key '" + key + "': member '" + m.name +
                        "' repeats a sample already read from input #" +
                        std::to_string(done->second + 1));
    }
    RawSample s;
    s.key = key;
    s.input = input;
    pending_.push_back(std::move(s));
    it = pending_index_.emplace(key, base_ + pending_.size() - 1).first;
  }
  RawSample& s = pending_[it->second - base_];
  for (const auto& other : s.members)
    if (other.name == m.name) {
      s.errors.push_back("member '" + m.name + "' appears twice in the archive");
      return;
    }
  pending_bytes_ += m.data.size();
  s.members.push_back(std::move(m));
  while (pending_bytes_ > window_ && pending_.size() > 1) release_oldest(ready);
}

void SampleGrouper::release_oldest(std::vector<RawSample>& ready) {
  RawSample& s = pending_.front();
  pending_bytes_ -= s.bytes();
  pending_index_.erase(s.key);
  released_.emplace(key_hash(s.key), s.input);
  ready.push_back(std::move(s));
  pending_.pop_front();
  ++base_;
}

void SampleGrouper::flush(std::vector<RawSample>& ready) {
  while (!pending_.empty()) release_oldest(ready);
}

}  // namespace tarmac
