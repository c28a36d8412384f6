#pragma once
// Checkpoints and --resume: what an interrupted conversion left in its staging directory,
// whether a new run may go on from it, and getting the output directory ready either way.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "convert/convert_options.h"
#include "format/checkpoint.h"
#include "source/input_reader.h"

namespace tarmac {

struct Table;

/// What prepare_output found in the output directory.
struct PreparedOutput {
  /// The checkpoint to resume from (--resume, when an interrupted run left one).
  std::optional<format::Checkpoint> checkpoint;
  /// --resume found a finished dataset: nothing to do.
  bool complete = false;
  /// The old dataset's files that publishing replaces (--overwrite): its annotation file,
  /// manifest, shard list and the shards its manifest lists.
  std::vector<std::string> replaced;
};

/// Gets the output directory ready: with --resume, every file the checkpoint names back in the
/// staging directory. Refuses a directory holding anything but an old dataset's files, unless
/// --overwrite, and even then a file named like a dataset's that no dataset there lists.
/// Throws FatalError.
PreparedOutput prepare_output(const ConvertOptions& o, const std::filesystem::path& out,
                              const std::filesystem::path& staging);

/// Refuses (FatalError) an input file or folder (or --table) inside the output directory:
/// the dataset written there could replace it.
void refuse_inputs_inside_output(const ConvertOptions& o);

/// -o s3://: an s3:// input (an object, or a prefix listed) or --table inside the output
/// prefix `destination`, or a listed input prefix that holds the output prefix, is refused
/// (FatalError naming both) before anything is listed, written or deleted: the run would
/// read, replace or delete its own input.
void refuse_inputs_inside_remote_output(const ConvertOptions& o, const std::string& destination);

/// The samples converted up to the checkpoint in `staging`; nullopt when there is none or it
/// cannot be read.
std::optional<uint64_t> checkpoint_samples(const std::filesystem::path& staging);

/// The checkpoint.json at `path`, read by its one parser (format::parse_checkpoint: the seal,
/// every supported version). Throws FatalError ("cannot resume from 'PATH': ...").
format::Checkpoint load_checkpoint(const std::filesystem::path& path);

/// Every option that shapes the output, typed, under the name of its flag ("--size": [w, h]):
/// what resume and merge compare, whoever fills ConvertOptions (the CLI or a library caller).
/// Leaves out what does not change the output: -j, --overwrite, --resume, --checkpoint-every,
/// -o, the inputs and --shard (compared on their own).
nlohmann::ordered_json output_options(const ConvertOptions& o);

/// What must not change between an interrupted run and its --resume: output_options, the
/// part, each input file's size and modification time, and the table's (`table`, the one read:
/// an s3://, http(s):// or pipe: table, which has no modification time, by its size and
/// CRC-32).
nlohmann::ordered_json run_fingerprint(const ConvertOptions& o,
                                       const std::vector<std::string>& inputs,
                                       const Table* table = nullptr);

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
