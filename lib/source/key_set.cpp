#include "source/key_set.h"

#include <cstring>

namespace tarmac {
namespace {

// 64-bit FNV-1a.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

__extension__ typedef unsigned __int128 u128;  // GCC and Clang on 64-bit targets

uint64_t mix(uint64_t x, uint64_t y) {
  const u128 p = static_cast<u128>(x) * y;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}

// A word-at-a-time multiply-fold hash (wyhash's construction), unrelated to FNV, so the two
// halves of a fingerprint collide independently. Little-endian words, so it is the same on
// every machine tarmac builds for.
uint64_t fold_hash(std::string_view s) {
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                     k2 = 0x8ebc6af09c88c6e3ull;
  uint64_t h = mix(s.size() ^ k0, k1);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = mix(h ^ w ^ k2, k1);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = mix(h ^ tail ^ k0, k2);
  return mix(h ^ (h >> 29), k1);
}

constexpr size_t kInitialSlots = 1024;

}  // namespace

KeyFingerprint key_fingerprint(std::string_view key) {
  KeyFingerprint f{fnv1a(key), fold_hash(key)};
  if (f.a == 0 && f.b == 0) f.b = 1;
  return f;
}

size_t KeySet::slot_of(const KeyFingerprint& f) const {
  const size_t mask = fp_.size() - 1;
  // The slot comes from the second hash: FNV-1a's low bits are weak for keys that differ
  // only near their end.
  for (size_t i = static_cast<size_t>(f.b) & mask;; i = (i + 1) & mask)
    if (fp_[i] == f || fp_[i] == KeyFingerprint{}) return i;
}

std::optional<uint32_t> KeySet::find(std::string_view key) const {
  if (fp_.empty()) return std::nullopt;
  const size_t i = slot_of(key_fingerprint(key));
  if (fp_[i] == KeyFingerprint{}) return std::nullopt;
  return value_[i];
}

std::optional<uint32_t> KeySet::insert(std::string_view key, uint32_t value) {
  if ((size_ + 1) * 4 > fp_.size() * 3) grow();
  const KeyFingerprint f = key_fingerprint(key);
  const size_t i = slot_of(f);
  if (fp_[i] == f) return value_[i];
  fp_[i] = f;
  value_[i] = value;
  ++size_;
  return std::nullopt;
}

void KeySet::assign(std::string_view key, uint32_t value) {
  if ((size_ + 1) * 4 > fp_.size() * 3) grow();
  const KeyFingerprint f = key_fingerprint(key);
  const size_t i = slot_of(f);
  if (!(fp_[i] == f)) {
    fp_[i] = f;
    ++size_;
  }
  value_[i] = value;
}

void KeySet::grow() {
  std::vector<KeyFingerprint> old_fp(fp_.empty() ? kInitialSlots : fp_.size() * 2);
  std::vector<uint32_t> old_value(old_fp.size());
  old_fp.swap(fp_);
  old_value.swap(value_);
  for (size_t j = 0; j < old_fp.size(); ++j) {
    if (old_fp[j] == KeyFingerprint{}) continue;
    const size_t i = slot_of(old_fp[j]);
    fp_[i] = old_fp[j];
    value_[i] = old_value[j];
  }
}

}  // namespace tarmac
