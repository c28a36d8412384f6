#pragma once
// Checkpoints and --resume: what an interrupted conversion left in its staging directory and
// whether a new run may go on from it. Getting the output folder ready is output_folder.h's;
// what a run must not change between its start and its --resume, fingerprint.h's.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "source/input_reader.h"

namespace tarmac {

struct Table;

/// The samples converted up to the checkpoint in `staging`; nullopt when there is none or it
/// cannot be read.
std::optional<uint64_t> checkpoint_samples(const std::filesystem::path& staging);

/// The checkpoint.json at `path`, read by its one parser (format::parse_checkpoint: the seal,
/// every supported version). Throws FatalError ("cannot resume from 'PATH': ...").
format::Checkpoint load_checkpoint(const std::filesystem::path& path);

/// What a checkpoint records of where the reader stood after the last sample it covers: `mark`,
/// and the bytes and CRC-32 of every input before mark.input (`inputs`: the reader's, final up
/// to there).
format::CheckpointRead read_position(const ReadMark& mark, const std::vector<InputInfo>& inputs);

/// The read_position a checkpoint recorded, for InputReader::expect; nullopt when it recorded
/// none (no sample yet).
std::optional<ReadExpectation> read_expectation(const format::Checkpoint& checkpoint);

/// Refuses (FatalError) to resume a run whose fingerprint differs from the checkpoint's,
/// naming the first difference; then removes from staging whatever came after the checkpoint.
/// `uploaded`: closed shards already on the server (-o s3://), whose local copies may be gone.
void check_resumable(const format::Checkpoint& checkpoint, const nlohmann::ordered_json& now,
                     const std::filesystem::path& staging,
                     const std::vector<std::string>& uploaded = {});

/// --resume over a complete dataset in `out`: it is this run's result only if its manifest
/// records the same output options, part, inputs (their paths, in order) and table (`table`,
/// the one read: by its CRC-32) as `now` (run_fingerprint) holds. Refuses (FatalError) the
/// first difference, as check_resumable refuses a changed input; a dataset without a readable
/// manifest is refused too (nothing to compare).
void check_complete_resumable(const std::filesystem::path& out, const nlohmann::ordered_json& now,
                              const Table* table = nullptr);

/// The same comparison for a complete dataset elsewhere (-o s3://): `where` names it in the
/// message, `manifest_text` is its manifest.json as read (nullopt: it has none).
void check_complete_resumable(const std::string& where,
                              const std::optional<std::string>& manifest_text,
                              const nlohmann::ordered_json& now, const Table* table = nullptr);

}  // namespace tarmac
