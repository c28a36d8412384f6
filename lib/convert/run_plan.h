#pragma once
// A conversion's plan: what the run reads and how, and what each stage takes, settled from
// ConvertOptions once, before the output directory is touched. plan_run is where ConvertOptions
// ends: the stages after it see only their specs (stage_specs.h) and the run's control.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/stage_specs.h"
#include "convert/table_plan.h"
#include "remote/remote_config.h"
#include "source/input_reader.h"

namespace tarmac {

struct RunPlan {
  std::vector<std::string> inputs;  ///< every input of the run, expanded (s3:// prefixes, braces)
  std::string output;               ///< the local folder written (-o s3://: its checkpoint folder)
  std::shared_ptr<const remote::RemoteConfig> remote;  ///< null: no remote input
  PartSplit split = PartSplit::None;
  std::vector<std::string> part_inputs;  ///< this part's inputs, in order
  std::optional<TablePlan> table;
  std::string table_metadata;          ///< the annotation file's `table` entry (JSON object text)
  nlohmann::ordered_json fingerprint;  ///< what a --resume must find unchanged
  std::string lock_record;             ///< what the output's lock says of this run
  SampleRecipe recipe;                 ///< what the workers make of each sample
  WriterSpec writer;                   ///< what the writer lays out
  FeedSpec feed;                       ///< what the reader thread's feed needs
  RecorderSpec recorder;               ///< what the writer thread's recorder needs
  RemoteOutputSpec remote_output;      ///< -o s3://: what the uploads need
  ManifestSpec manifest;               ///< what the manifest records of the options
  /// How the inputs are read (all but `exclude`, which the open output decides).
  InputReaderOptions reader;
  RunControl run;  ///< threads, errors, the output's state, progress, the stop
  /// A run that reads its inputs twice (a pre-pass, then the conversion): each pipe: command's
  /// first output, which every later run of it must repeat byte for byte. Null otherwise.
  std::shared_ptr<PipeRuns> pipe_runs;
};

/// Settles what the run reads: remote prefixes and brace ranges expanded into the objects they
/// name (each checked to exist), this part's inputs, the class folders (--classes-from-dirs),
/// the whole table read and its rows grouped (--table), and each stage's spec. `o` is the run's
/// own copy (its inputs expanded, its classes found, in place). Throws UsageError or FatalError
/// (ConvertStopped for a stop request) with nothing written: an earlier checkpoint is as it was.
RunPlan plan_run(ConvertOptions& o, const std::filesystem::path& staging);

/// The output directory when an input directory (of `inputs`) holds it: never read as input.
/// Returns the directories to leave out, and says which input held it in `notes`. Throws
/// FatalError when the output is an input directory.
std::vector<std::string> output_inside_inputs(const std::vector<std::string>& inputs,
                                              const std::string& output,
                                              std::vector<std::string>& notes);

}  // namespace tarmac
