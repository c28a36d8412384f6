#include "convert/convert.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "common/version.h"
#include "convert/checkpoint.h"
#include "convert/dataset_writer.h"
#include "convert/pipeline.h"
#include "convert/run_manifest.h"
#include "convert/run_recorder.h"
#include "convert/run_report.h"
#include "convert/sample_feed.h"
#include "convert/sample_processor.h"
#include "convert/table_plan.h"
#include "format/layout.h"
#include "format/shard_list.h"
#include "labels/schema.h"
#include "remote/inputs.h"
#include "remote/url.h"
#include "source/class_scan.h"
#include "source/input_reader.h"
#include "source/key_scan.h"
#include "source/sample_grouper.h"
#include "write/column_store.h"
#include "write/file_util.h"
#include "write/json_log.h"
#include "write/manifest_file.h"
#include "write/output_lock.h"
#include "write/safetensors_writer.h"
#include "write/staging.h"
#include "write/tar_writer.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

using namespace format;

PartSplit select_part(const ConvertOptions& o, std::vector<std::string>* part_inputs) {
  if (o.part_count <= 1) {
    if (part_inputs) *part_inputs = o.inputs;
    return PartSplit::None;
  }
  if (o.part_index >= o.part_count)
    throw FatalError("--shard " + std::to_string(o.part_index) + "/" +
                     std::to_string(o.part_count) +
                     ": the part index must be below the part count (parts are numbered from 0)");
  const uint64_t m = o.inputs.size(), n = o.part_count;
  // A table's rows may pair members of different inputs: every part reads them all.
  if (m < n || !o.table.empty()) {
    if (part_inputs) *part_inputs = o.inputs;
    return PartSplit::Samples;
  }
  if (part_inputs)
    part_inputs->assign(o.inputs.begin() + static_cast<ptrdiff_t>(o.part_index * m / n),
                        o.inputs.begin() + static_cast<ptrdiff_t>((o.part_index + 1) * m / n));
  return PartSplit::Inputs;
}

namespace {

// Thrown inside the run when a stop request ends it (after its checkpoint, if any).
struct StopSignal {
  int signal;
};

// A run that converted no sample, without allow_empty; why.
struct EmptyRun {
  std::string reason;
};

void begin_phase(ConvertProgress* p, ConvertProgress::Phase phase, uint64_t total_bytes) {
  if (!p) return;
  p->bytes_read.store(0, std::memory_order_relaxed);
  p->total_bytes.store(total_bytes, std::memory_order_relaxed);
  p->phase.store(phase);
}

// How the run groups members into samples. --on-duplicate: inputs are numbered among all of
// o.inputs, so that a part of --shard I/N by inputs keeps the sample one run over all inputs
// would keep. Under `last`, a pre-pass over this part's inputs and all later ones finds each
// key's last input; under `first`, a part by inputs reads the keys of the parts before it
// (into `kept`, which the options then point to).
GrouperOptions grouping_for(const ConvertOptions& o, PartSplit split, const InputReaderOptions& ro,
                            KeySet& kept) {
  GrouperOptions grouping;
  grouping.window_bytes = o.group_window;
  grouping.on_duplicate = o.on_duplicate;
  grouping.input_names = o.inputs;
  if (split == PartSplit::Inputs)
    grouping.first_input = static_cast<uint32_t>(o.part_index * o.inputs.size() / o.part_count);
  if (o.on_duplicate != OnDuplicate::Last &&
      (o.on_duplicate != OnDuplicate::First || grouping.first_input == 0))
    return grouping;
  const bool last = o.on_duplicate == OnDuplicate::Last;
  if (last && std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end())
    throw FatalError(
        "--on-duplicate last reads the inputs twice, so it cannot read standard input ('-')");
  const auto begin = o.inputs.begin() + (last ? grouping.first_input : 0);
  InputReader scan(
      std::vector<std::string>(begin, last ? o.inputs.end() : begin + grouping.first_input), ro);
  begin_phase(o.progress,
              last ? ConvertProgress::Phase::LastScan : ConvertProgress::Phase::FirstScan,
              scan.total_size());
  kept = scan_kept_keys(scan, o.on_duplicate, last ? grouping.first_input : 0, o.key_rule, [&] {
    if (o.stop && o.stop->requested()) throw StopSignal{o.stop->signal.load()};
    if (o.progress) o.progress->bytes_read.store(scan.bytes_read(), std::memory_order_relaxed);
  });
  grouping.kept = &kept;
  return grouping;
}

// --classes-from-dirs: the class folders of every input of the run (not only this part's, so
// that every part numbers classes alike), read by name before anything is converted.
std::vector<std::string> class_folders(const ConvertOptions& o, const InputReaderOptions& ro) {
  InputReader scan(o.inputs, ro);
  begin_phase(o.progress, ConvertProgress::Phase::ClassScan, scan.total_size());
  return scan_class_folders(scan, o.key_rule, o.image_exts, [&] {
    if (o.stop && o.stop->requested()) throw StopSignal{o.stop->signal.load()};
    if (o.progress) o.progress->bytes_read.store(scan.bytes_read(), std::memory_order_relaxed);
  });
}

// The output directory when an input directory holds it: never read as input. Returns the
// directories to leave out, and says which input held it in `notes`.
std::vector<std::string> output_inside_inputs(const ConvertOptions& o,
                                              std::vector<std::string>& notes) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(o.output, ec);
  if (ec) return {};
  for (const auto& in : o.inputs) {
    if (in == "-" || !fs::is_directory(in, ec)) continue;
    const fs::path dir = fs::weakly_canonical(in, ec);
    if (ec) continue;
    if (dir == out)
      throw FatalError("the output directory '" + o.output + "' is the input directory '" + in +
                       "': choose an output directory outside it (e.g. -o ../out)");
    // Inside: every component of the input's path starts the output's.
    if (std::mismatch(dir.begin(), dir.end(), out.begin(), out.end()).first == dir.end())
      notes.push_back("input '" + in + "' holds the output directory '" + o.output +
                      "': it is left out of the input (never read as input)");
  }
  if (notes.empty()) return {};
  return {out.string()};
}

// The bytes a run reads from `inputs`, for progress: files' sizes, directories' walked (what
// the reader will read from them, `exclude` left out); 0 when unknown (standard input).
uint64_t input_bytes(const std::vector<std::string>& inputs,
                     const std::vector<std::string>& exclude) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& in : inputs) {
    if (in == "-") return 0;
    if (remote::is_remote(in)) {
      const auto size = remote::known_size(in);
      if (!size) return 0;
      total += *size;
      continue;
    }
    if (!fs::is_directory(in, ec)) {
      total += fs::file_size(in, ec);
      if (ec) return 0;
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(in, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_symlink(ec)) continue;
      if (it->is_directory(ec)) {
        for (const auto& x : exclude)
          if (fs::equivalent(it->path(), x, ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    if (ec) return 0;
  }
  return total;
}

// What the output lock says of this run: the command line, or what a library caller asked.
std::string lock_record(const ConvertOptions& o) {
  std::string text;
  for (const auto& a : o.command_line) text += (text.empty() ? "" : " ") + a;
  return text.empty() ? "tarmac::convert() into '" + o.output + "'" : text;
}

// After a run ended early: keeps the staging directory when it holds a checkpoint that a
// --resume can go on from (the samples it records), else removes it.
std::optional<uint64_t> keep_resumable(const ConvertOptions& o, const fs::path& staging) {
  std::error_code ec;
  const bool rereadable = std::find(o.inputs.begin(), o.inputs.end(), "-") == o.inputs.end();
  if (rereadable && fs::exists(staging / kCheckpointFile, ec)) {
    if (const auto samples = checkpoint_samples(staging)) return samples;
  }
  fs::remove_all(staging, ec);
  return std::nullopt;
}

}  // namespace

const char* phase_text(ConvertProgress::Phase phase) {
  switch (phase) {
    case ConvertProgress::Phase::Starting:
      return "starting";
    case ConvertProgress::Phase::ClassScan:
      return "finding the class folders (--classes-from-dirs)";
    case ConvertProgress::Phase::FirstScan:
      return "reading the keys of earlier parts (--on-duplicate first)";
    case ConvertProgress::Phase::LastScan:
      return "finding each key's last input (--on-duplicate last)";
    case ConvertProgress::Phase::Converting:
      return "converting";
    case ConvertProgress::Phase::Finishing:
      return "writing the annotation file";
    case ConvertProgress::Phase::Done:
      return "done";
    case ConvertProgress::Phase::Stopped:
      return "stopped";
  }
  return "";
}

ConvertResult convert(const ConvertOptions& options) {
  const auto t0 = Clock::now();
  ConvertOptions o = options;  // with the class folders found, under --classes-from-dirs
  if (o.format == OutputFormat::Keep &&
      (o.geometry.crop != CropMode::None || o.geometry.resize != ResizeMode::None))
    throw FatalError(
        "--format keep stores the source bytes untouched; it cannot be combined "
        "with --crop or --size");
  // Remote inputs: prefixes and brace ranges become the objects they name, each checked to
  // exist before anything is written.
  std::shared_ptr<const remote::RemoteConfig> remote_config;
  if (std::any_of(o.inputs.begin(), o.inputs.end(),
                  [](const std::string& in) { return remote::is_remote(in); })) {
    remote_config = std::make_shared<const remote::RemoteConfig>(
        remote::RemoteConfig::from_environment(o.endpoint_url));
    o.inputs = remote::expand_inputs(o.inputs, *remote_config);
  }
  const fs::path out(o.output);
  const fs::path staging = out / kStagingDir;
  refuse_inputs_inside_output(o);
  std::vector<std::string> part_inputs;
  const PartSplit split = select_part(o, &part_inputs);
  if (o.resume && std::find(part_inputs.begin(), part_inputs.end(), "-") != part_inputs.end())
    throw FatalError("--resume cannot be used with standard input (-): it cannot be read again");
  if (o.classes_from_dirs && o.no_images)
    throw FatalError(
        "--classes-from-dirs takes each sample's class from the folder of its image; it cannot "
        "be combined with --no-images");
  if (o.dedup.enabled() && (o.no_images || !o.table.empty() || !o.instances.empty()))
    throw FatalError(std::string("--dedup compares source images; it cannot be combined with ") +
                     (o.no_images       ? "--no-images"
                      : o.table.empty() ? "--instances"
                                        : "--table") +
                     (o.no_images ? "" : ", with which several outputs share one image"));
  if (o.dedup.enabled() && (o.dedup.distance < 0 || o.dedup.distance > 32))
    throw FatalError("--dedup near:" + std::to_string(o.dedup.distance) +
                     ": the distance must be 0 to 32 bits");
  if (!o.dedup.enabled() && !o.dedup.against.empty())
    throw FatalError("--dedup-against needs --dedup exact or --dedup near[:D]");
  std::vector<std::string> notes;
  if (o.classes_from_dirs && o.classes.empty()) {
    if (std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end())
      throw FatalError(
          "--classes-from-dirs reads the inputs' names first, so it cannot read standard input "
          "('-')");
    InputReaderOptions ro;
    ro.max_member_size = o.max_member_size;
    ro.skip_errors = o.skip_errors;
    ro.exclude = output_inside_inputs(o, notes);
    ro.remote = remote_config;
    ro.stop = o.stop;
    try {
      o.classes = class_folders(o, ro);
    } catch (const StopSignal& s) {  // nothing written yet: an earlier checkpoint is as it was
      throw ConvertStopped("stopped by " + signal_name(s.signal), s.signal,
                           checkpoint_samples(staging));
    }
  }
  // --table: the whole table is read, and its rows grouped by the members they name, before
  // anything else; a malformed table stops here.
  std::optional<TablePlan> plan;
  if (!o.table.empty()) {
    if (o.no_images)
      throw FatalError(
          "--table: rows are made from the images they name; it cannot be combined "
          "with --no-images");
    if (!o.instances.empty())
      throw FatalError(
          "--instances splits per-sample label files; with --table each row is "
          "already one output");
    TableOptions table_options = o.table_options;
    table_options.max_cell_bytes = o.max_label_size;  // one flag for a label, in a file or a cell
    Table table = load_table(o.table, table_options);
    o.table_metadata =
        json{{"format", table_format_name(table.format)}, {"metadata", table.metadata}}.dump();
    plan.emplace(std::move(table), o.table_prefix, o.dense);
  }
  const json fingerprint = run_fingerprint(o, part_inputs);
  ConvertResult result;
  const OutputLock lock(out, lock_record(o));
  notes.clear();  // the output exists now: the check is exact
  const std::vector<std::string> exclude = output_inside_inputs(o, notes);
  result.notes = notes;
  PreparedOutput prepared = prepare_output(o, out, staging);
  std::optional<json>& cp = prepared.checkpoint;
  if (prepared.complete) {
    result.already_complete = true;
    return result;
  }
  // Checked before the run starts, so that a refused resume keeps its checkpoint.
  if (cp) check_resumable(*cp, fingerprint, staging);
  const uint64_t resume_entries = cp ? cp->at("entries").get<uint64_t>() : 0;

  try {
    InputReaderOptions ro;
    ro.max_member_size = o.max_member_size;
    ro.skip_errors = o.skip_errors;
    ro.exclude = exclude;
    ro.remote = remote_config;
    ro.stop = o.stop;
    InputReader reader(part_inputs, ro);
    if (cp)
      if (auto expected = read_expectation(*cp)) reader.expect(std::move(*expected));
    DatasetWriter writer(o, staging, cp ? &cp->at("writer") : nullptr);
    if (cp) {
      result.resumed = true;
      result.resumed_samples = writer.samples();
    }
    RunRecorder recorder(o, staging, fingerprint, cp ? &*cp : nullptr, reader, writer, result);

    // The counts the writer keeps, for a progress display (the feed counts what it has read).
    // A resumed run's are stored before its phase begins, which a display takes as the start
    // of the rate: only this run's samples count in it.
    ConvertProgress* const progress = o.progress;
    if (progress) progress->outputs.store(!o.instances.empty(), std::memory_order_relaxed);
    auto report = [&] {
      if (!progress) return;
      progress->samples.store(writer.samples(), std::memory_order_relaxed);
      progress->skipped.store(result.skipped_samples, std::memory_order_relaxed);
      // With a table the samples are rows, and a group of rows one entry: rows are counted.
      progress->handled.store(
          plan ? writer.samples() + result.skipped_samples : recorder.entries_done(),
          std::memory_order_relaxed);
    };
    report();

    KeySet kept;
    const GrouperOptions grouping = grouping_for(o, split, ro, kept);
    begin_phase(o.progress, ConvertProgress::Phase::Converting,
                o.progress ? input_bytes(part_inputs, exclude) : 0);

    const int threads =
        o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    Pipeline pipe(static_cast<size_t>(threads) * 4 + 4);

    SampleFeed feed(o, split, grouping, resume_entries, !cp && split != PartSplit::Samples, reader,
                    pipe, plan ? &*plan : nullptr);
    // process_sample turns bad data into the sample's error; what it throws stops the run (a
    // codec plugin that cannot be loaded, an encoder failure).
    WorkerStats worker_stats;
    const SampleWork work_fn = [&o, &plan](const RawSample& raw) {
      return raw.table_group >= 0 ? process_table_group(raw, *plan, o) : process_sample(raw, o);
    };
    // Declared after everything the threads use, so joined (on every path) before it goes.
    PipelineThreads pool(pipe);
    pool.start([&feed] { feed.run(); });

    for (int i = 0; i < threads; ++i) pool.start([&] { run_worker(pipe, work_fn, worker_stats); });

    // A stop request ends the input where it is; what is in flight is still written (for at
    // most kStopDrainSeconds, or none if urgent), then a checkpoint records it.
    std::optional<Clock::time_point> stop_t0;
    auto poll_stop = [&] {
      if (!o.stop || !o.stop->requested()) return;
      if (!stop_t0) {
        stop_t0 = Clock::now();
        pipe.stop_input();
      }
      if (o.stop->urgent() || seconds_since(*stop_t0) > kStopDrainSeconds) pipe.cancel();
    };
    std::exception_ptr writer_failure;
    const auto writer_t0 = Clock::now();
    try {
      while (auto item = pipe.next(std::chrono::milliseconds(100), [&] {
        poll_stop();
        report();
      })) {
        for (Entry& entry : item->entries)
          if (!entry.replay) recorder.handle(entry);
        report();
        poll_stop();
      }
      poll_stop();
    } catch (...) {
      writer_failure = std::current_exception();
      pipe.cancel();
    }
    if (stop_t0 && !writer_failure) {
      o.stop->checkpointing.store(true);
      recorder.write_checkpoint();  // before waiting for the reader, which may be mid-read
      o.stop->checkpointing.store(false);
      pipe.cancel();
      pool.join();
      report();
      if (progress) progress->phase.store(ConvertProgress::Phase::Stopped);
      throw StopSignal{o.stop->signal.load()};
    }
    const double writer_seconds = seconds_since(writer_t0);
    report();
    if (progress) progress->phase.store(ConvertProgress::Phase::Finishing);
    const auto finish_t0 = Clock::now();
    pool.join();
    const Pipeline::Waits waits = pipe.waits();
    result.stages.threads = threads;
    result.stages.reader_seconds = feed.seconds();
    result.stages.first_release_seconds = feed.first_release_seconds();
    result.stages.ahead_samples = worker_stats.ahead_taken.load();
    result.stages.members_interleaved = feed.members_interleaved();
    for (const auto& in : reader.inputs())
      if (result.stages.input_compression.empty()) result.stages.input_compression = in.compression;
    result.stages.reader_blocked_seconds = waits.reader;
    result.stages.worker_seconds = worker_stats.seconds;
    result.stages.worker_idle_seconds = waits.workers;
    result.stages.writer_seconds = writer_seconds;
    result.stages.writer_idle_seconds = waits.writer;
    if (writer_failure) std::rethrow_exception(writer_failure);
    if (worker_stats.failure) std::rethrow_exception(worker_stats.failure);
    if (feed.failure()) std::rethrow_exception(feed.failure());
    if (feed.entries_read() < resume_entries)
      throw FatalError("cannot resume: the inputs now hold " + std::to_string(feed.entries_read()) +
                       " samples, fewer than the " + std::to_string(resume_entries) +
                       " the interrupted run had converted");
    // Everything is converted: a kill from here on resumes straight to the finish.
    recorder.write_checkpoint();

    auto [skipped_json, ignored_json, duplicates_json] = recorder.read_all();
    for (const auto& j : skipped_json)
      if (j.contains("sample") && j.at("code") == error_code_name(ErrorCode::NoImage))
        ++result.no_image_samples;
    for (const auto& j : skipped_json)
      if (result.skipped.size() < 20 && j.contains("sample"))
        result.skipped.push_back(
            {j.at("input").get<std::string>(), j.at("sample").get<std::string>(),
             j.at("code").get<std::string>(), j.at("reason").get<std::string>()});

    for (const auto& n : feed.notices()) {
      json j = {{"input", reader.inputs()[n.input].path},
                {"member", n.member},
                {"code", error_code_name(n.code)},
                {"reason", n.reason}};
      if (n.is_error) {
        ++result.error_members;
        skipped_json.push_back(j);
      } else {
        ++result.ignored_members;
        ignored_json.push_back(j);
      }
    }

    for (const auto& in : reader.inputs()) {
      result.input_bytes += in.bytes_read;
      result.remote_retries += in.retries;
      result.remote_resumed_bytes += in.resumed_bytes;
      if (in.error.empty()) continue;
      result.input_errors.push_back(in.error);
      skipped_json.push_back({{"input", in.path},
                              {"archive", in.path},
                              {"code", error_code_name(ErrorCode::InputError)},
                              {"reason", in.error}});
    }
    result.unused_images = feed.unused_images();
    if (writer.samples() == 0 && !o.allow_empty) {
      uint64_t members = 0;
      for (const auto& in : reader.inputs()) members += in.members;
      throw EmptyRun{empty_run_reason(result, members, o)};
    }
    // Labels only, and no member was a label: samples of nothing but their keys.
    if (o.no_images && writer.schema().fields().empty() && !o.allow_empty) {
      std::string why = "the " + std::to_string(writer.samples()) +
                        " sample(s) hold no label: none of their members is a label file tarmac "
                        "reads (.json, .npy, .npz, .txt, .cls)";
      if (!ignored_json.empty())
        why += " (the first of " + std::to_string(ignored_json.size()) + " ignored: '" +
               ignored_json.at(0).value("member", std::string()) +
               "': " + ignored_json.at(0).value("reason", std::string()) + ")";
      throw EmptyRun{why};
    }
    const fs::path labels = writer.finish(std::string("tarmac ") + kVersion);
    result.samples = writer.samples();
    result.shards = writer.shard_names().size();
    result.image_bytes = writer.blob_bytes();
    result.annotation_bytes = fs::file_size(labels);
    ManifestRecord rec{o,
                       split,
                       reader.inputs(),
                       cp ? std::optional(resume_entries) : std::nullopt,
                       result,
                       writer,
                       staging,
                       labels,
                       plan ? &*plan : nullptr};
    format::Manifest manifest = run_manifest(rec, std::move(skipped_json), std::move(ignored_json),
                                             std::move(duplicates_json));
    if (!writer.shard_names().empty()) {
      format::ShardList list;
      for (size_t k = 0; k < writer.shard_names().size(); ++k)
        list.shards.push_back({writer.shard_names()[k], writer.shard_samples()[k],
                               fs::file_size(staging / writer.shard_names()[k])});
      manifest.shard_list = {format::kShardListFile, write_shard_list(staging, list)};
    }
    write_file_atomic((staging / kManifestFile).string(), format::sealed_manifest_text(manifest));
    result.schema = writer.schema().specs();
    for (const FieldSchema& f : writer.schema().fields()) {
      result.missing_values.push_back(f.missing);
      if (!f.mixed) continue;
      static constexpr const char* kWhat[] = {"number(s) or numeric array(s)", "string(s)",
                                              "other JSON value(s)"};
      std::string held;
      for (int k = 0; k < 3; ++k)
        if (f.kind_counts[k])
          held += (held.empty() ? "" : ", ") + std::to_string(f.kind_counts[k]) + " " + kWhat[k];
      result.field_warnings.push_back("field '" + f.name +
                                      "' holds values of types that share no column type (" + held +
                                      "): each is kept as its JSON text");
    }
    publish_dataset(out, staging, writer.shard_names(), prepared.replaced);
    result.stages.finish_seconds = seconds_since(finish_t0);
    result.seconds = seconds_since(t0);
    if (progress) progress->phase.store(ConvertProgress::Phase::Done);
  } catch (const StopSignal& s) {
    throw ConvertStopped("stopped by " + signal_name(s.signal), s.signal,
                         keep_resumable(o, staging));
  } catch (const EmptyRun& e) {  // nothing worth resuming: the staging directory goes
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw ConvertStopped("no sample was converted: " + e.reason +
                             ". Nothing was published; pass --allow-empty to accept an empty "
                             "dataset",
                         0, std::nullopt);
  } catch (const InputChanged& e) {
    // Refused before anything new was written: the checkpoint stays for --overwrite to discard.
    throw FatalError(e.what());
  } catch (const BadSampleError& e) {
    throw ConvertStopped(e.what(), 0, keep_resumable(o, staging), /*bad_sample=*/true);
  } catch (const std::exception& e) {
    throw ConvertStopped(e.what(), 0, keep_resumable(o, staging));
  }
  return result;
}

}  // namespace tarmac
