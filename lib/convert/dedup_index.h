#pragma once
// convert --dedup: which samples were kept, by content, and whether a new one duplicates one of
// them or a sample of another dataset (--dedup-against). Exact duplicates are found by the
// pixel digest in a hash map; near ones by the perceptual hash alone in a multi-index
// (NearIndex): the same pixels have the same pHash, so near mode needs no digest (it is zero).
// The kept samples' hashes and keys are also appended to a file in the staging directory, so
// that a resumed run (--resume) finds them again.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transform/content_hash.h"
#include "write/file_util.h"

namespace tarmac {

/// 64-bit hashes, searched for those within Hamming distance D of a query without comparing
/// against all of them: the 64 bits are split into D + 1 bands, and two hashes within distance
/// D agree exactly on at least one band (pigeonhole), so only the entries sharing a band with
/// the query are compared. Each band maps its value to a chain of entries (dense heads for
/// bands of at most 20 bits). A lookup costs O((D + 1) * (1 + c)) where c is the entries
/// sharing a band value: about N / 2^(64 / (D + 1)) for spread hashes (N / 8192 per band at
/// D = 4). Memory: 8 + 4 (D + 1) bytes per entry, plus 2^bits heads per band.
class NearIndex {
 public:
  /// Throws InternalError unless 0 <= max_distance <= 32.
  explicit NearIndex(int max_distance);
  /// Adds `hash` as the next entry (entries are numbered from 0).
  void add(uint64_t hash);
  /// The entry nearest to `hash` within the distance, the lowest-numbered among the nearest,
  /// and its distance; nullopt when none is that near.
  std::optional<std::pair<uint32_t, int>> nearest(uint64_t hash) const;
  size_t size() const { return hashes_.size(); }
  int max_distance() const { return max_distance_; }

 private:
  struct Band {
    int shift = 0, bits = 0;
    std::vector<uint32_t> dense_heads;                    // bits <= 20: by band value
    std::unordered_map<uint64_t, uint32_t> sparse_heads;  // wider bands
    std::vector<uint32_t> next;  // per entry: the previous one in its chain
    uint64_t value(uint64_t h) const { return (h >> shift) & ((uint64_t{1} << bits) - 1); }
  };
  int max_distance_;
  std::vector<uint64_t> hashes_;
  std::vector<Band> bands_;
};

/// What a dropped sample duplicates.
struct DedupMatch {
  std::string key;           ///< the kept sample's key (here, or in `dataset`)
  std::string dataset;       ///< the --dedup-against directory; empty: this run
  int distance = 0;          ///< Hamming distance of the perceptual hashes; 0 for the same pixels
  bool same_pixels = false;  ///< found by the pixel digest (exact mode)
};

/// The --dedup-against references of a run, each verified (verified_labels_crc32) before the
/// output is touched, as the run's fingerprint records them ({"path", "labels_crc32"}), so that
/// a --resume finds a replaced reference. A reference that is the output directory itself is
/// refused (UsageError): --overwrite would replace the dataset the run compares against.
nlohmann::ordered_json dedup_references(const std::vector<std::string>& against,
                                        const std::string& output);

class DedupIndex {
 public:
  /// `near`: --dedup near (else exact) with `max_distance`; `against`: the --dedup-against
  /// directories, whose samples are loaded first (their `__phash__` column). Keeps its file at
  /// `file`: new, or (resume: the size a checkpoint recorded) the interrupted run's, whose
  /// samples it reads back. Each directory of `against` is verified before it is read
  /// (verified_labels_crc32) and, given `against_crc32` (the run's fingerprint, one per
  /// directory), must still be that dataset. Throws FatalError (naming a directory without
  /// `__phash__`, damaged, or changed).
  DedupIndex(bool near, int max_distance, const std::vector<std::string>& against,
             const std::filesystem::path& file, std::optional<uint64_t> resume_size,
             const std::vector<std::string>& against_crc32 = {});
  /// One sample of another dataset, as --dedup-against loads them (before any add()).
  void add_other(const std::string& dir, std::string key, uint64_t phash);
  /// The sample `hash` duplicates: exact, the same pixels as a kept one, else one of
  /// --dedup-against with the same perceptual hash; near, the nearest perceptual hash within
  /// the distance (the lowest-numbered among the nearest).
  std::optional<DedupMatch> find(const ContentHash& hash) const;
  /// Records a kept sample.
  void add(const std::string& key, const ContentHash& hash);
  /// Writes what is buffered to the file and syncs it; returns its size, for a checkpoint.
  uint64_t checkpoint();
  uint64_t kept() const { return kept_; }

 private:
  struct DigestHash {
    size_t operator()(const PixelDigest& d) const { return static_cast<size_t>(d[0]); }
  };
  void add_dataset(const std::string& dir, const std::string& expected_crc32);
  void remember(std::string key, const ContentHash& hash);

  bool near_;
  std::vector<std::string> keys_;      // per entry: others' then this run's kept samples
  std::vector<uint32_t> dataset_;      // per entry: index into datasets_ + 1; 0: this run
  std::vector<std::string> datasets_;  // --dedup-against directories
  std::vector<uint32_t> near_entry_;   // NearIndex entry -> entry
  NearIndex near_index_;
  std::unordered_map<PixelDigest, uint32_t, DigestHash> exact_;
  OutputFile file_;
  std::vector<uint8_t> buffer_;
  uint64_t kept_ = 0;
};

}  // namespace tarmac
