#include "convert/dedup_index.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "common/error.h"
#include "format/names.h"
#include "read/dataset.h"
#include "write/manifest_file.h"

namespace tarmac {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr int kDenseBits = 20;

// A record of the index file: digest (2 x u64; zero under near), phash (u64), key length (u32),
// key bytes; all little-endian, as every tarmac target.
constexpr size_t kRecordHead = 3 * sizeof(uint64_t) + sizeof(uint32_t);

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

}  // namespace

NearIndex::NearIndex(int max_distance) : max_distance_(max_distance) {
  if (max_distance < 0 || max_distance > 32)
    throw InternalError("NearIndex: the distance must be 0 to 32");
  const int n = max_distance + 1;
  int shift = 0;
  for (int b = 0; b < n; ++b) {
    Band band;
    band.bits = 64 / n + (b < 64 % n ? 1 : 0);
    band.shift = shift;
    shift += band.bits;
    if (band.bits <= kDenseBits) band.dense_heads.assign(size_t{1} << band.bits, kNone);
    bands_.push_back(std::move(band));
  }
}

void NearIndex::add(uint64_t hash) {
  const auto id = static_cast<uint32_t>(hashes_.size());
  hashes_.push_back(hash);
  for (Band& b : bands_) {
    const uint64_t v = b.bits == 64 ? hash : b.value(hash);
    uint32_t* head = nullptr;
    if (!b.dense_heads.empty()) {
      head = &b.dense_heads[static_cast<size_t>(v)];
    } else {
      head = &b.sparse_heads.try_emplace(v, kNone).first->second;
    }
    b.next.push_back(*head);
    *head = id;
  }
}

std::optional<std::pair<uint32_t, int>> NearIndex::nearest(uint64_t hash) const {
  uint32_t best = kNone;
  int best_d = max_distance_ + 1;
  for (const Band& b : bands_) {
    const uint64_t v = b.bits == 64 ? hash : b.value(hash);
    uint32_t id = kNone;
    if (!b.dense_heads.empty()) {
      id = b.dense_heads[static_cast<size_t>(v)];
    } else if (const auto it = b.sparse_heads.find(v); it != b.sparse_heads.end()) {
      id = it->second;
    }
    for (; id != kNone; id = b.next[id]) {
      const int d = hamming_distance(hash, hashes_[id]);
      if (d <= max_distance_ && (d < best_d || (d == best_d && id < best))) {
        best = id;
        best_d = d;
      }
    }
  }
  if (best == kNone) return std::nullopt;
  return std::pair{best, best_d};
}

nlohmann::ordered_json dedup_references(const std::vector<std::string>& against,
                                        const std::string& output) {
  namespace fs = std::filesystem;
  auto json = nlohmann::ordered_json::array();
  std::error_code ec;
  fs::path out = fs::weakly_canonical(output, ec);
  if (out.filename().empty()) out = out.parent_path();
  for (const auto& dir : against) {
    std::error_code ec2;
    fs::path ref = fs::weakly_canonical(dir, ec2);
    if (ref.filename().empty()) ref = ref.parent_path();
    if (!ec && !ec2 && ref == out)
      throw UsageError("--dedup-against '" + dir + "' is the output directory itself: the run " +
                       "would compare its samples with the dataset it replaces (--overwrite " +
                       "removes it, --resume finds it half written). Convert into another " +
                       "directory (-o), then deduplicate against '" + dir + "'");
    json.push_back(
        {{"path", dir}, {"labels_crc32", verified_labels_crc32(dir, "--dedup-against")}});
  }
  return json;
}

DedupIndex::DedupIndex(bool near, int max_distance, const std::vector<std::string>& against,
                       const std::filesystem::path& file, std::optional<uint64_t> resume_size,
                       const std::vector<std::string>& against_crc32)
    : near_(near), near_index_(near ? max_distance : 0) {
  for (size_t i = 0; i < against.size(); ++i)
    add_dataset(against[i], i < against_crc32.size() ? against_crc32[i] : "");
  if (!resume_size) {
    file_.open(file.string());
    return;
  }
  // The interrupted run's kept samples, up to its checkpoint, in the order they were kept.
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes(*resume_size);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw FatalError("cannot resume: '" + file.string() + "' (the --dedup index) is missing or " +
                     "shorter than its checkpoint says; run again with --overwrite");
  for (size_t at = 0; at < bytes.size();) {
    if (bytes.size() - at < kRecordHead)
      throw FatalError("cannot resume: '" + file.string() + "' ends inside a record");
    ContentHash h;
    uint32_t key_size = 0;
    std::memcpy(h.digest.data(), &bytes[at], 16);
    std::memcpy(&h.phash, &bytes[at + 16], 8);
    std::memcpy(&key_size, &bytes[at + 24], 4);
    at += kRecordHead;
    if (bytes.size() - at < key_size)
      throw FatalError("cannot resume: '" + file.string() + "' ends inside a record");
    remember(std::string(reinterpret_cast<const char*>(&bytes[at]), key_size), h);
    at += key_size;
  }
  file_.reopen_at(file.string(), *resume_size);
}

void DedupIndex::add_dataset(const std::string& dir, const std::string& expected_crc32) {
  std::optional<Dataset> opened;
  try {
    opened.emplace(dir);
  } catch (const std::exception& e) {
    throw FatalError("--dedup-against '" + dir + "': " + e.what());
  }
  // Verified once it is open (the map is what is read): the dataset the run's fingerprint
  // recorded when it began, still intact.
  const std::string crc = verified_labels_crc32(dir, "--dedup-against");
  if (!expected_crc32.empty() && crc != expected_crc32)
    throw FatalError("--dedup-against '" + dir + "' changed since this run began (or since the " +
                     "interrupted run it resumes): its annotation file's CRC-32 was " +
                     expected_crc32 + ", now " + crc +
                     "; its samples would be compared with two datasets. Run again without " +
                     "--resume (--overwrite), against the dataset you mean");
  const Dataset& other = *opened;
  const FieldSpec* f = other.find_field(format::kPhashField);
  if (!f || f->dtype != DType::U64 || !f->shape.empty() || f->ragged)
    throw FatalError("--dedup-against '" + dir + "': the dataset has no " + format::kPhashField +
                     " column (U64 per sample); convert it with --dedup to give it one");
  const auto hashes = other.column(format::kPhashField).values.as<uint64_t>();
  for (size_t i = 0; i < other.size(); ++i) add_other(dir, std::string(other.key(i)), hashes[i]);
}

void DedupIndex::add_other(const std::string& dir, std::string key, uint64_t phash) {
  if (datasets_.empty() || datasets_.back() != dir) datasets_.push_back(dir);
  dataset_.push_back(static_cast<uint32_t>(datasets_.size()));
  near_entry_.push_back(static_cast<uint32_t>(keys_.size()));
  keys_.push_back(std::move(key));
  near_index_.add(phash);
}

std::optional<DedupMatch> DedupIndex::find(const ContentHash& hash) const {
  if (!near_)
    if (const auto it = exact_.find(hash.digest); it != exact_.end())
      return DedupMatch{keys_[it->second], "", 0, true};
  const auto hit = near_index_.nearest(hash.phash);
  if (!hit) return std::nullopt;
  const uint32_t entry = near_entry_[hit->first];
  const uint32_t ds = dataset_[entry];
  return DedupMatch{keys_[entry], ds ? datasets_[ds - 1] : "", hit->second, false};
}

void DedupIndex::remember(std::string key, const ContentHash& hash) {
  const auto entry = static_cast<uint32_t>(keys_.size());
  keys_.push_back(std::move(key));
  dataset_.push_back(0);
  if (near_) {
    near_entry_.push_back(entry);
    near_index_.add(hash.phash);
  } else {
    exact_.emplace(hash.digest, entry);
  }
  ++kept_;
}

void DedupIndex::add(const std::string& key, const ContentHash& hash) {
  put(buffer_, hash.digest[0]);
  put(buffer_, hash.digest[1]);
  put(buffer_, hash.phash);
  put(buffer_, static_cast<uint32_t>(key.size()));
  buffer_.insert(buffer_.end(), key.begin(), key.end());
  remember(key, hash);
  if (buffer_.size() >= (1 << 16)) {
    file_.write_all(buffer_);
    buffer_.clear();
  }
}

uint64_t DedupIndex::checkpoint() {
  file_.write_all(buffer_);
  buffer_.clear();
  file_.sync();
  return file_.position();
}

}  // namespace tarmac
