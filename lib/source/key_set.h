#pragma once
// A compact set of sample keys with a 32-bit value each (the input a key was read from). Keys
// are not stored: each is a 128-bit fingerprint (two independent 64-bit hashes), so a false
// match between n keys has probability about n^2 / 2^129 (1e-21 at a billion keys). Open
// addressing with linear probing over 20-byte slots, at most 3/4 full and doubled when it
// would be fuller: 27 bytes a key just before a doubling, 53 just after (an unordered_map of
// 64-bit hashes takes about 40 and, at a billion keys, has a 3% chance of a false match).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tarmac {

/// 128 bits that stand for a key; {0, 0} never occurs (it marks an empty slot).
struct KeyFingerprint {
  uint64_t a = 0, b = 0;
  bool operator==(const KeyFingerprint&) const = default;
};

/// The fingerprint of a key: stable across runs and machines.
KeyFingerprint key_fingerprint(std::string_view key);

class KeySet {
 public:
  /// The value stored for `key`, or nullopt when absent.
  std::optional<uint32_t> find(std::string_view key) const;
  /// Adds `key` with `value` unless present; returns the value already stored, if any.
  std::optional<uint32_t> insert(std::string_view key, uint32_t value);
  /// Adds `key` or replaces its value.
  void assign(std::string_view key, uint32_t value);

  size_t size() const { return size_; }
  size_t capacity() const { return fp_.size(); }
  /// Bytes held by the table.
  size_t memory_bytes() const {
    return fp_.capacity() * sizeof(KeyFingerprint) + value_.capacity() * sizeof(uint32_t);
  }

 private:
  size_t slot_of(const KeyFingerprint& f) const;  // its slot, or the empty one where it goes
  void grow();

  // Two parallel arrays rather than one of structs: 20 bytes a slot, not 24 with padding.
  std::vector<KeyFingerprint> fp_;
  std::vector<uint32_t> value_;
  size_t size_ = 0;
};

}  // namespace tarmac
