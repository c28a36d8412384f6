#pragma once
// checkpoint.json (docs/format.md 6): what an interrupted conversion recorded in its staging
// directory so that `convert --resume` goes on from there. Typed and versioned as ninja's
// build log is: one parser (parse_checkpoint) that reads every version from
// kCheckpointOldestSupportedVersion on, one writer (checkpoint_text) that writes
// kCheckpointCurrentVersion, sealed as the manifest is (kCheckpointSealKey). No other file
// spells a key of it.
//
// Versions:
//   1  (tarmac 0.1, to 2026-12-02): `counts` a list of 3 (the earliest) or 5 numbers; the
//      writer's `schema` the schema's JSON as a string; sealed since 2026-12-01, unsealed before.
//   2  `counts` an object of named counts; `schema` the schema's JSON itself; always sealed.
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tarmac::format {

inline constexpr int kCheckpointOldestSupportedVersion = 1;
inline constexpr int kCheckpointCurrentVersion = 2;

/// What the run counted up to the checkpoint, under the manifest's names for them.
struct CheckpointCounts {
  uint64_t skipped_samples = 0;
  uint64_t ignored_members = 0;
  uint64_t duplicates = 0;
  uint64_t no_instance_samples = 0;
  uint64_t duplicate_content_samples = 0;
};

/// Where the reader stood after the last entry the checkpoint covers: input `input` read to
/// byte `bytes` with CRC-32 `crc32` of those bytes (`end`: to its end), and (bytes, CRC-32) of
/// every input before it.
struct CheckpointRead {
  uint32_t input = 0;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  bool end = false;
  std::vector<std::pair<uint64_t, uint32_t>> done;
};

/// The shard being written at the checkpoint: its bytes so far and their CRC-32.
struct CheckpointOpenShard {
  uint64_t size = 0;
  uint32_t crc32 = 0;
};

/// The dataset writer's state: samples and bytes stored, the shards (names, and for the
/// closed ones their CRC-32 and size; samples per shard for all), the open shard, the column
/// spill file's length, and the schema seen so far (the labels library's JSON: its
/// Schema::checkpoint()).
struct CheckpointWriter {
  uint64_t samples = 0;
  uint64_t blob_bytes = 0;
  uint64_t key_bytes = 0;
  std::vector<std::string> shards;
  std::vector<uint32_t> shard_crcs;
  std::vector<uint64_t> shard_sizes;
  std::vector<uint64_t> shard_samples;
  std::optional<CheckpointOpenShard> open_shard;
  uint64_t spill = 0;
  nlohmann::ordered_json schema;
};

struct Checkpoint {
  int version = kCheckpointCurrentVersion;  ///< as read; checkpoint_text writes the current one
  /// The run's fingerprint (convert/checkpoint.h, run_fingerprint): what a --resume must match.
  nlohmann::ordered_json run;
  uint64_t entries = 0;                ///< entries handled, in input order
  std::optional<CheckpointRead> read;  ///< none before the first entry
  CheckpointWriter writer;
  /// Bytes written of skipped.jsonl, ignored.jsonl and duplicates.jsonl (kSkippedLog, ...).
  std::array<uint64_t, 3> logs{};
  CheckpointCounts counts;
  std::optional<uint64_t> dedup;  ///< --dedup: entries of dedup.index covered
};

/// Parses checkpoint.json's text. Its seal is checked first: a text edited or damaged since it
/// was written is refused, and so is an unsealed one of version 2 or later (version 1 was
/// written unsealed before 2026-12-01 and is read without). Throws ParseError saying what is
/// wrong (the seal, an unknown version, the key that is missing or of the wrong type, shard
/// lists that disagree); the caller adds the path.
Checkpoint parse_checkpoint(std::string_view text);

/// The text of `c` as kCheckpointCurrentVersion, sealed: what parse_checkpoint reads back.
std::string checkpoint_text(const Checkpoint& c);

}  // namespace tarmac::format
