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
#include "convert/dedup_index.h"
#include "convert/fingerprint.h"
#include "convert/output_folder.h"
#include "convert/pipeline.h"
#include "convert/remote_output.h"
#include "convert/run_internal.h"
#include "convert/run_manifest.h"
#include "convert/run_plan.h"
#include "convert/run_recorder.h"
#include "convert/run_report.h"
#include "convert/sample_feed.h"
#include "convert/sample_processor.h"
#include "convert/stage_specs.h"
#include "convert/table_input.h"
#include "convert/table_plan.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/shard_list.h"
#include "format/table_metadata.h"
#include "labels/schema.h"
#include "remote/inputs.h"
#include "remote/url.h"
#include "source/class_scan.h"
#include "source/input_reader.h"
#include "source/key_scan.h"
#include "source/pipe_stream.h"
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

namespace {

using namespace convert_detail;

// How the run groups members into samples. --on-duplicate: inputs are numbered among all of
// the run's inputs, so that a part of --shard I/N by inputs keeps the sample one run over all
// inputs would keep. Under `last`, a pre-pass over this part's inputs and all later ones finds each
// key's last input (check_convert_options refused standard input); under `first`, a part by
// inputs reads the keys of the parts before it (into `kept`, which the options then point to).
GrouperOptions grouping_for(const RunPlan& plan, const InputReaderOptions& ro, KeySet& kept) {
  const FeedSpec& f = plan.feed;
  const std::vector<std::string>& inputs = plan.inputs;
  GrouperOptions grouping;
  grouping.window_bytes = f.group_window;
  grouping.on_duplicate = f.on_duplicate;
  grouping.input_names = inputs;
  if (plan.split == PartSplit::Inputs)
    grouping.first_input = static_cast<uint32_t>(f.part.index * inputs.size() / f.part.count);
  if (f.on_duplicate != OnDuplicate::Last &&
      (f.on_duplicate != OnDuplicate::First || grouping.first_input == 0))
    return grouping;
  const bool last = f.on_duplicate == OnDuplicate::Last;
  const auto begin = inputs.begin() + (last ? grouping.first_input : 0);
  InputReader scan(
      std::vector<std::string>(begin, last ? inputs.end() : begin + grouping.first_input), ro);
  begin_phase(plan.run.progress,
              last ? ConvertProgress::Phase::LastScan : ConvertProgress::Phase::FirstScan,
              scan.total_size());
  kept = scan_kept_keys(scan, f.on_duplicate, last ? grouping.first_input : 0, f.key_rule, [&] {
    if (plan.run.stop && plan.run.stop->requested()) throw StopSignal(plan.run.stop->signal.load());
    if (plan.run.progress)
      plan.run.progress->bytes_read.store(scan.bytes_read(), std::memory_order_relaxed);
  });
  grouping.kept = &kept;
  return grouping;
}

// The bytes a run reads from `inputs`, for progress: files' sizes, directories' walked (what
// the reader will read from them, `exclude` left out); 0 when unknown (standard input, pipes).
uint64_t input_bytes(const std::vector<std::string>& inputs,
                     const std::vector<std::string>& exclude) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& in : inputs) {
    if (in == "-" || is_pipe(in)) return 0;
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
        if (format::holds_dataset(it->path())) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    if (ec) return 0;
  }
  return total;
}

// After a run ended early: keeps the staging directory when it holds a checkpoint that a
// --resume can go on from (the samples it records), else removes it.
std::optional<uint64_t> keep_resumable(const std::vector<std::string>& inputs,
                                       const fs::path& staging) {
  std::error_code ec;
  const bool rereadable = std::find(inputs.begin(), inputs.end(), "-") == inputs.end();
  if (rereadable && fs::exists(staging / kCheckpointFile, ec)) {
    if (const auto samples = checkpoint_samples(staging)) return samples;
  }
  fs::remove_all(staging, ec);
  return std::nullopt;
}

// The output directory, locked and ready for this run.
struct OpenOutput {
  PreparedOutput prepared;
  std::vector<std::string> exclude;  // directories of the inputs never read (the output)
  uint64_t resume_entries = 0;       // entries the checkpoint covers (0: a fresh run)
};

// What the reader thread found besides the samples, for the manifest's lists.
struct FeedOutcome {
  std::vector<MemberNotice> notices;
  uint64_t unused_images = 0;
  Clock::time_point finish_t0;  // when the last sample was written
};

// Gets the locked output directory ready (prepare_output) and checks a checkpoint found there
// against this run. -o s3:// (`destination` not empty): makes `remote`, which takes the lock
// object and checks the prefix and, on --resume, what was uploaded. Throws FatalError with the
// output as it was: a refused resume keeps its checkpoint, a new run leaves nothing.
OpenOutput open_output(const RunPlan& plan, const fs::path& out, const fs::path& staging,
                       const std::string& destination, std::unique_ptr<RemoteOutput>& remote,
                       ConvertResult& result) {
  OpenOutput open;
  std::vector<std::string> notes;  // the output exists now: the check is exact
  open.exclude = output_inside_inputs(plan.inputs, plan.output, notes);
  result.notes = notes;
  // What an interrupted run of this checkpoint folder sent: read before prepare_output clears
  // the folder (--overwrite), so that those objects stay tarmac's to replace.
  const std::vector<std::string> recorded =
      destination.empty() ? std::vector<std::string>{} : recorded_objects(staging, destination);
  open.prepared = prepare_output({plan.run.overwrite, plan.run.resume}, out, staging);
  if (open.prepared.complete) {  // reused as this run's result only once compared with it
    check_complete_resumable(out, plan.fingerprint, plan.table ? &plan.table->table() : nullptr);
    return open;
  }
  const auto& cp = open.prepared.checkpoint;
  std::vector<std::string> uploaded;  // closed shards already on the server
  if (!destination.empty()) {
    try {
      remote = std::make_unique<RemoteOutput>(plan.remote_output, destination, staging);
      if (remote->begin(recorded)) {  // --resume of a run killed after its manifest went up
        // This run's result only once compared with it, as a local complete dataset is.
        check_complete_resumable(destination, remote->manifest_text(), plan.fingerprint,
                                 plan.table ? &plan.table->table() : nullptr);
        remote.reset();
        std::error_code ec;
        fs::remove_all(staging, ec);
        open.prepared.complete = true;
        return open;
      }
      if (cp) uploaded = remote->check_uploaded(cp->writer);
    } catch (...) {
      remote.reset();
      std::error_code ec;
      if (!cp) fs::remove_all(staging, ec);  // a new run leaves nothing
      throw;
    }
  }
  if (cp) {
    check_resumable(*cp, plan.fingerprint, staging, uploaded);
    open.resume_entries = cp->entries;
  }
  return open;
}

// A stop request's drain, polled by the writer thread: the input ends at the first poll after
// the request; the pipeline is cancelled once the drain is urgent, over kStopDrainSeconds, or
// kStopIdleSeconds without an item (a drain then waits on a sample a worker is still
// converting: a 20000x20000 PNG may take ten seconds to encode, and the stop does not wait for
// it; it is converted again on --resume).
class StopDrain {
 public:
  StopDrain(const StopRequest* stop, Pipeline& pipe) : stop_(stop), pipe_(pipe) {}
  void item_came() { last_item_ = Clock::now(); }
  bool stopping() const { return t0_.has_value(); }
  void poll() {
    if (!stop_ || !stop_->requested()) return;
    if (!t0_) {
      t0_ = Clock::now();
      pipe_.stop_input();
    }
    if (stop_->urgent() || seconds_since(*t0_) > kStopDrainSeconds ||
        seconds_since(std::max(*t0_, last_item_)) > kStopIdleSeconds)
      pipe_.cancel();
  }

 private:
  const StopRequest* stop_;
  Pipeline& pipe_;
  std::optional<Clock::time_point> t0_;
  Clock::time_point last_item_ = Clock::now();
};

// Where the run's time went, stage by stage (run_report.h says which stage limited it).
StageTimes stage_times(int threads, const SampleFeed& feed, const WorkerStats& workers,
                       const Pipeline::Waits& waits, const InputReader& reader,
                       double writer_seconds) {
  StageTimes t;
  t.threads = threads;
  t.reader_seconds = feed.seconds();
  t.first_release_seconds = feed.first_release_seconds();
  t.ahead_samples = workers.ahead_taken.load();
  t.members_interleaved = feed.members_interleaved();
  for (const auto& in : reader.inputs())
    if (t.input_compression.empty()) t.input_compression = in.compression;
  t.reader_blocked_seconds = waits.reader;
  t.worker_seconds = workers.seconds;
  t.worker_idle_seconds = waits.workers;
  t.writer_seconds = writer_seconds;
  t.writer_idle_seconds = waits.writer;
  return t;
}

// Runs the pipeline: the reader thread feeding the transform workers, the writer taking their
// samples in order, until the input ends. A stop request ends the input where it is; what is
// in flight is still written (for at most kStopDrainSeconds, or none if urgent), then a
// checkpoint records it and StopSignal is thrown. Any failure of a stage is rethrown once every
// thread is joined; on success a last checkpoint covers every sample.
FeedOutcome run_pipeline(const RunPlan& plan, const OpenOutput& open, const InputReaderOptions& ro,
                         InputReader& reader, DatasetWriter& writer, RunRecorder& recorder,
                         RemoteOutput* remote, ConvertResult& result) {
  const bool resumed = open.prepared.checkpoint.has_value();
  // The counts the writer keeps, for a progress display (the feed counts what it has read).
  // A resumed run's are stored before its phase begins, which a display takes as the start
  // of the rate: only this run's samples count in it.
  ConvertProgress* const progress = plan.run.progress;
  if (progress)
    progress->outputs.store(!plan.recipe.labels.instances.empty(), std::memory_order_relaxed);
  auto report = [&] {
    if (!progress) return;
    progress->samples.store(writer.samples(), std::memory_order_relaxed);
    progress->skipped.store(recorder.counts().skipped_samples, std::memory_order_relaxed);
    // With a table the samples are rows, and a group of rows one entry: rows are counted.
    progress->handled.store(
        plan.table ? writer.samples() + recorder.counts().skipped_samples : recorder.entries_done(),
        std::memory_order_relaxed);
  };
  report();

  KeySet kept;
  const GrouperOptions grouping = grouping_for(plan, ro, kept);
  begin_phase(progress, ConvertProgress::Phase::Converting,
              progress ? input_bytes(plan.part_inputs, open.exclude) : 0);

  const int threads =
      plan.run.threads > 0 ? plan.run.threads : std::max(1u, std::thread::hardware_concurrency());
  Pipeline pipe(static_cast<size_t>(threads) * 4 + 4);

  const TablePlan* table = plan.table ? &*plan.table : nullptr;
  SampleFeed feed(plan.feed, plan.split, grouping, open.resume_entries,
                  !resumed && plan.split != PartSplit::Samples, reader, pipe, table);
  // process_sample turns bad data into the sample's error; what it throws stops the run (a
  // codec plugin that cannot be loaded, an encoder failure).
  WorkerStats worker_stats;
  const SampleRecipe& recipe = plan.recipe;
  const SampleWork work_fn = [&recipe, table](const RawSample& raw) {
    return raw.table_group >= 0 ? process_table_group(raw, *table, recipe)
                                : process_sample(raw, recipe);
  };
  // Declared after everything the threads use, so joined (on every path) before it goes.
  PipelineThreads pool(pipe);
  pool.start([&feed] { feed.run(); });

  for (int i = 0; i < threads; ++i)
    pool.start([&] { run_worker(pipe, work_fn, worker_stats, plan.run.stop); });

  StopDrain drain(plan.run.stop, pipe);
  auto poll_stop = [&] { drain.poll(); };
  std::exception_ptr writer_failure;
  const auto writer_t0 = Clock::now();
  try {
    while (auto item = pipe.next(std::chrono::milliseconds(100), [&] {
      poll_stop();
      report();
      if (remote) remote->check();  // a failed upload stops the run
    })) {
      drain.item_came();
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
  if (drain.stopping() && !writer_failure) {
    plan.run.stop->checkpointing.store(true);
    recorder.write_checkpoint();  // before waiting for the reader, which may be mid-read
    plan.run.stop->checkpointed.store(true);  // a worker deep in an encode is not waited for long
    plan.run.stop->checkpointing.store(false);
    pipe.cancel();
    pool.join();
    report();
    if (progress) progress->phase.store(ConvertProgress::Phase::Stopped);
    throw StopSignal(plan.run.stop->signal.load());
  }
  const double writer_seconds = seconds_since(writer_t0);
  report();
  if (progress) progress->phase.store(ConvertProgress::Phase::Finishing);
  FeedOutcome outcome;
  outcome.finish_t0 = Clock::now();
  pool.join();
  result.stages = stage_times(threads, feed, worker_stats, pipe.waits(), reader, writer_seconds);
  if (writer_failure) std::rethrow_exception(writer_failure);
  if (worker_stats.failure) std::rethrow_exception(worker_stats.failure);
  if (feed.failure()) std::rethrow_exception(feed.failure());
  if (feed.entries_read() < open.resume_entries)
    throw FatalError("cannot resume: the inputs now hold " + std::to_string(feed.entries_read()) +
                     " samples, fewer than the " + std::to_string(open.resume_entries) +
                     " the interrupted run had converted");
  // Everything is converted: a kill from here on resumes straight to the finish.
  recorder.write_checkpoint();
  outcome.notices = feed.notices();
  outcome.unused_images = feed.unused_images();
  return outcome;
}

// The run's lists for the manifest (skipped, ignored, duplicates: the recorder's logs, then
// the reader's member notices and input errors), and the counts the result keeps of them.
RunRecorder::Lists collect_lists(RunRecorder& recorder, const FeedOutcome& feed,
                                 const InputReader& reader, ConvertResult& result) {
  const RecordedCounts& counted = recorder.counts();
  result.skipped_samples = counted.skipped_samples;
  result.ignored_members = counted.ignored_members;
  result.duplicates = counted.duplicates;
  result.no_instance_samples = counted.no_instance_samples;
  result.duplicate_content_samples = counted.duplicate_content_samples;
  result.first_duplicate_content = counted.first_duplicate_content;
  result.field_warnings.insert(result.field_warnings.end(), counted.field_warnings.begin(),
                               counted.field_warnings.end());
  RunRecorder::Lists lists = recorder.read_all();
  using Kind = format::ProvenanceEntry::Kind;
  for (const auto& e : lists.skipped)
    if (e.kind == Kind::Sample && e.coded(ErrorCode::NoImage)) ++result.no_image_samples;
  for (const auto& e : lists.skipped)
    if (result.skipped.size() < 20 && e.kind == Kind::Sample)
      result.skipped.push_back({e.input, e.name, e.code, e.reason});

  for (const auto& n : feed.notices) {
    format::ProvenanceEntry e = format::provenance_entry(reader.inputs()[n.input].path,
                                                         Kind::Member, n.member, n.code, n.reason);
    if (n.is_error) {
      ++result.error_members;
      lists.skipped.push_back(std::move(e));
    } else {
      ++result.ignored_members;
      lists.ignored.push_back(std::move(e));
    }
    if (n.code == ErrorCode::TarmacDataset)
      result.notes.push_back("input '" + reader.inputs()[n.input].path +
                             "' holds a tarmac dataset in '" + n.member +
                             "': it is left out of the input (never read as input)");
  }

  for (const auto& in : reader.inputs()) {
    result.input_bytes += in.bytes_read;
    result.remote_retries += in.retries;
    result.remote_resumed_bytes += in.resumed_bytes;
    if (in.error.empty()) continue;
    result.input_errors.push_back(in.error);
    lists.skipped.push_back(
        format::provenance_entry(in.path, Kind::Archive, in.path, ErrorCode::InputError, in.error));
  }
  result.unused_images = feed.unused_images;
  return lists;
}

// Refuses (EmptyRun, saying why) a run that converted no sample, or under --no-images samples
// holding no label, unless --allow-empty.
void refuse_empty(const RunPlan& plan, const InputReader& reader, const DatasetWriter& writer,
                  const RunRecorder::Lists& lists, const ConvertResult& result) {
  if (plan.run.allow_empty) return;
  if (writer.samples() == 0) {
    uint64_t members = 0;
    for (const auto& in : reader.inputs()) members += in.members;
    throw EmptyRun(empty_run_reason(result, members, plan.feed.on_duplicate, plan.recorder.dedup,
                                    plan.feed.part));
  }
  // Labels only, and no member was a label: samples of nothing but their keys.
  if (!plan.writer.images && writer.schema().fields().empty()) {
    std::string why = "the " + std::to_string(writer.samples()) +
                      " sample(s) hold no label: none of their members is a label file tarmac "
                      "reads (.json, .npy, .npz, .txt, .cls)";
    if (!lists.ignored.empty())
      why += " (the first of " + std::to_string(lists.ignored.size()) + " ignored: '" +
             lists.ignored.front().name + "': " + lists.ignored.front().reason + ")";
    throw EmptyRun(why);
  }
}

// Writes the annotation file (the writer's last shard closed) into the staging directory and
// counts what the dataset holds; returns its path.
fs::path finish_labels(const RunPlan& plan, DatasetWriter& writer, ConvertResult& result) {
  const fs::path labels = writer.finish(std::string("tarmac ") + kVersion, plan.table_metadata);
  result.samples = writer.samples();
  result.shards = writer.shard_names().size();
  result.image_bytes = writer.blob_bytes();
  result.annotation_bytes = fs::file_size(labels);
  return labels;
}

// Writes the shard list and the sealed manifest into the staging directory (written last: a
// staging directory with a manifest is a finished dataset waiting to be published).
void write_manifest(const RunPlan& plan, const OpenOutput& open, const InputReader& reader,
                    const DatasetWriter& writer, const fs::path& staging, const fs::path& labels,
                    RunRecorder::Lists lists, const ConvertResult& result) {
  ManifestRecord rec{
      plan.manifest,
      plan.split,
      reader.inputs(),
      open.prepared.checkpoint ? std::optional(open.resume_entries) : std::nullopt,
      result,
      writer,
      staging,
      labels,
      plan.table ? &*plan.table : nullptr,
      plan.fingerprint.contains("dedup_against") ? &plan.fingerprint["dedup_against"] : nullptr};
  format::Manifest manifest = run_manifest(rec, std::move(lists.skipped), std::move(lists.ignored),
                                           std::move(lists.duplicates));
  if (!writer.shard_names().empty()) {
    format::ShardList list;
    for (size_t k = 0; k < writer.shard_names().size(); ++k)
      list.shards.push_back(
          {writer.shard_names()[k], writer.shard_samples()[k], writer.shard_sizes()[k]});
    manifest.shard_list = {format::kShardListFile, write_shard_list(staging, list)};
  }
  write_file_atomic((staging / kManifestFile).string(), format::sealed_manifest_text(manifest));
}

// The schema for the summary: each field's missing values, and a warning per field whose
// values' types conflicted (kept as JSON text).
void describe_schema(const DatasetWriter& writer, ConvertResult& result) {
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
}

// -o s3://: every shard uploaded, then the annotation file, the shard list and the manifest;
// a stop request while it waits or sends ends it as StopSignal.
void publish_remote(const RunControl& run, RemoteOutput& remote, const DatasetWriter& writer,
                    ConvertResult& result) {
  auto stopped = [&] { return run.stop && run.stop->requested(); };
  try {
    remote.publish(writer, [&] {
      if (stopped()) throw StopSignal(run.stop->signal.load());
    });
  } catch (const remote::RemoteError&) {
    if (stopped()) throw StopSignal(run.stop->signal.load());
    throw;
  }
  remote.count(result);
}

// Called in a catch block: turns what ended the run early into what convert() throws
// (ConvertStopped; a changed input's refusal stays FatalError), keeping the staging directory
// when it holds a checkpoint a --resume can go on from, else removing it.
[[noreturn]] void end_early(const RunPlan& plan, const fs::path& staging) {
  const RunControl& run = plan.run;
  try {
    throw;
  } catch (const StopSignal& s) {
    throw ConvertStopped("stopped by " + signal_name(s.signal()), s.signal(),
                         keep_resumable(plan.inputs, staging));
  } catch (const EmptyRun& e) {  // nothing worth resuming: the staging directory goes
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw ConvertStopped("no sample was converted: " + std::string(e.what()) +
                             ". Nothing was published; pass --allow-empty to accept an empty "
                             "dataset",
                         0, std::nullopt);
  } catch (const InputChanged& e) {
    // Refused before anything new was written: the checkpoint stays for --overwrite to discard.
    throw FatalError(e.what());
  } catch (const remote::TransferStopped& e) {
    // An upload a stop request abandoned, reached by a path that did not see the request
    // first: the stop, exit 128+signal (cancel() without a signal stays a failure).
    const int sig = run.stop ? run.stop->signal.load() : 0;
    if (sig > 0)
      throw ConvertStopped("stopped by " + signal_name(sig), sig,
                           keep_resumable(plan.inputs, staging));
    throw ConvertStopped(e.what(), 0, keep_resumable(plan.inputs, staging));
  } catch (const BadSampleError& e) {
    throw ConvertStopped(e.what(), 0, keep_resumable(plan.inputs, staging), /*bad_sample=*/true);
  } catch (const std::bad_alloc&) {
    throw ConvertStopped(out_of_memory_text(run.progress ? run.progress->phase.load()
                                                         : ConvertProgress::Phase::Converting),
                         0, keep_resumable(plan.inputs, staging));
  } catch (const std::exception& e) {
    throw ConvertStopped(e.what(), 0, keep_resumable(plan.inputs, staging));
  }
}

}  // namespace

ConvertResult convert(const ConvertOptions& options) {
  const auto t0 = Clock::now();
  check_convert_options(options);
  ConvertOptions o = options;  // with the inputs expanded and the class folders found
  // -o s3://: the run stages in a local checkpoint folder, which stands for the output from
  // here on; `destination` is where the dataset goes.
  std::string destination;
  if (remote::is_s3(o.output)) {
    destination = o.output;
    o.output = remote_checkpoint_dir(destination, o.remote_output.checkpoint_dir);
  } else if (remote::is_remote(o.output)) {
    throw FatalError("-o '" + o.output +
                     "': tarmac writes a dataset into a directory or to s3://BUCKET/PREFIX/, "
                     "not to an http(s) URL");
  } else if (!o.remote_output.checkpoint_dir.empty()) {
    throw FatalError(
        "--checkpoint-dir is for -o s3://...: a local output keeps its checkpoint "
        "in itself ('" +
        o.output + "/" + kStagingDir + "')");
  }
  const fs::path out(o.output);
  const fs::path staging = out / kStagingDir;
  if (!destination.empty()) {
    std::vector<std::string> inputs = o.source.inputs;
    if (!o.table.path.empty()) inputs.push_back(o.table.path);
    refuse_inputs_inside_remote_output(inputs, destination);
  }
  const RunPlan plan = plan_run(o, staging);

  // -o s3://: the checkpoint folder goes once it holds nothing (after the lock file).
  struct RemoveIfEmpty {
    std::vector<fs::path> dirs;
    ~RemoveIfEmpty() {
      std::error_code ec;
      for (const auto& d : dirs) fs::remove(d, ec);  // only an empty one
    }
  } local_dirs;
  if (!destination.empty()) {
    local_dirs.dirs.push_back(out);
    if (o.remote_output.checkpoint_dir.empty())  // the default's .tarmac-checkpoint/BUCKET too
      local_dirs.dirs = {out, out.parent_path(), out.parent_path().parent_path()};
  }
  const OutputLock lock(out, plan.lock_record);
  ConvertResult result;
  std::unique_ptr<RemoteOutput> remote_out;
  const OpenOutput open = open_output(plan, out, staging, destination, remote_out, result);
  if (open.prepared.complete) {
    result.already_complete = true;
    return result;
  }
  const std::optional<format::Checkpoint>& cp = open.prepared.checkpoint;
  try {
    InputReaderOptions ro = plan.reader;
    ro.exclude = open.exclude;
    InputReader reader(plan.part_inputs, ro);
    if (cp)
      if (auto expected = read_expectation(*cp)) reader.expect(std::move(*expected));
    DatasetWriter writer(plan.writer, staging, cp ? &cp->writer : nullptr);
    if (cp) {
      result.resumed = true;
      result.resumed_samples = writer.samples();
    }
    RunRecorder recorder(plan.recorder, staging, plan.fingerprint, cp ? &*cp : nullptr, reader,
                         writer);
    if (remote_out) {  // each shard is uploaded once a checkpoint covers it
      remote_out->start(writer);
      recorder.on_checkpoint([&] { remote_out->queue_closed(writer); });
    }

    const FeedOutcome feed =
        run_pipeline(plan, open, ro, reader, writer, recorder, remote_out.get(), result);
    RunRecorder::Lists lists = collect_lists(recorder, feed, reader, result);
    refuse_empty(plan, reader, writer, lists, result);
    const fs::path labels = finish_labels(plan, writer, result);
    write_manifest(plan, open, reader, writer, staging, labels, std::move(lists), result);
    describe_schema(writer, result);
    // A table's member that is no column is in the manifest's table entry; said too (a
    // warning when its values are nowhere in the dataset), since a HumanData array a row short
    // is a broken file as often as metadata.
    if (plan.table)
      for (const auto& i : plan.table->table().ignored)
        (i.values_lost ? result.field_warnings : result.notes)
            .push_back("table '" + plan.table->table().path + "': not a label column: " + i.reason);
    if (remote_out) {
      publish_remote(plan.run, *remote_out, writer, result);
      remote_out.reset();
      std::error_code ec;
      fs::remove_all(staging, ec);
    } else {
      publish_dataset(out, staging, writer.shard_names(), open.prepared.replaced);
    }
    result.stages.finish_seconds = seconds_since(feed.finish_t0);
    result.seconds = seconds_since(t0);
    if (plan.run.progress) plan.run.progress->phase.store(ConvertProgress::Phase::Done);
  } catch (...) {
    remote_out.reset();  // uploads stopped, the lock object released, before staging is judged
    end_early(plan, staging);
  }
  return result;
}

}  // namespace tarmac
