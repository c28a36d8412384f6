#include "convert/run_plan.h"

#include <algorithm>

#include "common/error.h"
#include "convert/checkpoint.h"
#include "convert/dedup_index.h"
#include "convert/fingerprint.h"
#include "convert/output_folder.h"
#include "convert/run_internal.h"
#include "convert/table_input.h"
#include "format/layout.h"
#include "format/names.h"
#include "format/table_metadata.h"
#include "remote/inputs.h"
#include "remote/url.h"
#include "source/class_scan.h"
#include "source/pipe_stream.h"

namespace tarmac {
namespace fs = std::filesystem;
using namespace convert_detail;

PartSplit select_part(const ConvertOptions& o, std::vector<std::string>* part_inputs) {
  check_part(o.part);
  if (o.part.count <= 1) {
    if (part_inputs) *part_inputs = o.source.inputs;
    return PartSplit::None;
  }
  const uint64_t m = o.source.inputs.size(), n = o.part.count;
  // A table's rows may pair members of different inputs: every part reads them all.
  if (m < n || !o.table.path.empty()) {
    if (part_inputs) *part_inputs = o.source.inputs;
    return PartSplit::Samples;
  }
  if (part_inputs)
    part_inputs->assign(
        o.source.inputs.begin() + static_cast<ptrdiff_t>(o.part.index * m / n),
        o.source.inputs.begin() + static_cast<ptrdiff_t>((o.part.index + 1) * m / n));
  return PartSplit::Inputs;
}

namespace {

// --classes-from-dirs: the class folders of every input of the run (not only this part's, so
// that every part numbers classes alike), read by name before anything is converted.
std::vector<std::string> class_folders(const ConvertOptions& o, const InputReaderOptions& ro) {
  InputReader scan(o.source.inputs, ro);
  begin_phase(o.run.progress, ConvertProgress::Phase::ClassScan, scan.total_size());
  return scan_class_folders(scan, o.members.key_rule, o.members.image_exts, [&] {
    if (o.run.stop && o.run.stop->requested()) throw StopSignal(o.run.stop->signal.load());
    if (o.run.progress)
      o.run.progress->bytes_read.store(scan.bytes_read(), std::memory_order_relaxed);
  });
}

}  // namespace

std::vector<std::string> output_inside_inputs(const std::vector<std::string>& inputs,
                                              const std::string& output,
                                              std::vector<std::string>& notes) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(output, ec);
  if (ec) return {};
  for (const auto& in : inputs) {
    if (in == "-" || is_pipe(in) || !fs::is_directory(in, ec)) continue;
    const fs::path dir = fs::weakly_canonical(in, ec);
    if (ec) continue;
    if (dir == out)
      throw FatalError("the output directory '" + output + "' is the input directory '" + in +
                       "': choose an output directory outside it (e.g. -o ../out)");
    // Inside: every component of the input's path starts the output's.
    if (std::mismatch(dir.begin(), dir.end(), out.begin(), out.end()).first == dir.end())
      notes.push_back("input '" + in + "' holds the output directory '" + output +
                      "': it is left out of the input (never read as input)");
  }
  if (notes.empty()) return {};
  return {out.string()};
}

namespace {

// A folder of a directory input that holds a dataset tarmac wrote (an earlier run's output
// kept beside its data): never read as input, and listed as ignored (InputReaderOptions).
std::string dataset_in_folder(const fs::path& dir) {
  if (!format::holds_dataset(dir)) return {};
  return std::string("a tarmac dataset (it holds ") + format::kManifestFile + " and " +
         format::kLabelsFile + "): not read as input";
}

// An input directory that is itself a dataset tarmac wrote: refused, since its files are no
// raw input (its manifest.json would be read as a label).
void refuse_dataset_inputs(const ConvertOptions& o) {
  std::error_code ec;
  for (const auto& in : o.source.inputs) {
    if (in == "-" || is_pipe(in) || remote::is_remote(in) || !fs::is_directory(in, ec)) continue;
    if (format::holds_dataset(in))
      throw FatalError("input '" + in + "' is a tarmac dataset (it holds " + format::kManifestFile +
                       " and " + format::kLabelsFile +
                       "), not raw data: read it with tarmac's reader, combine datasets with "
                       "'tarmac merge', or convert the data it was made from (its " +
                       format::kManifestFile + " lists them under \"inputs\")");
  }
}

// The run's inputs with its --table: what the output must not sit over.
std::vector<std::string> inputs_and_table(const ConvertOptions& o) {
  std::vector<std::string> inputs = o.source.inputs;
  if (!o.table.path.empty()) inputs.push_back(o.table.path);
  return inputs;
}

// What the output lock says of this run: the command line, or what a library caller asked.
std::string lock_record(const ConvertOptions& o) {
  std::string text;
  for (const auto& a : o.provenance.command_line) text += (text.empty() ? "" : " ") + a;
  return text.empty() ? "tarmac::convert() into '" + o.output + "'" : text;
}

// How the run's inputs are read, but for the folders left out (the output, once it exists).
InputReaderOptions reader_options(const ConvertOptions& o, const RunPlan& plan) {
  InputReaderOptions ro;
  ro.pipe_runs = plan.pipe_runs;
  ro.max_member_size = o.limits.max_member_size;
  ro.skip_errors = o.run.skip_errors;
  ro.dataset_in_folder = dataset_in_folder;
  ro.remote = plan.remote;
  ro.stop = o.run.stop;
  return ro;
}

}  // namespace

RunPlan plan_run(ConvertOptions& o, const fs::path& staging) {
  RunPlan plan;
  if (std::any_of(o.source.inputs.begin(), o.source.inputs.end(),
                  [](const std::string& in) { return remote::is_remote(in); })) {
    plan.remote = std::make_shared<const remote::RemoteConfig>(
        remote::RemoteConfig::from_environment(o.source.endpoint_url));
    o.source.inputs = remote::expand_inputs(o.source.inputs, *plan.remote);
  }
  refuse_inputs_inside_output(inputs_and_table(o), o.output);
  refuse_dataset_inputs(o);
  plan.split = select_part(o, &plan.part_inputs);
  if (o.labels.classes_from_dirs || o.members.on_duplicate == OnDuplicate::Last)
    plan.pipe_runs = std::make_shared<PipeRuns>();
  if (o.run.resume &&
      std::find(plan.part_inputs.begin(), plan.part_inputs.end(), "-") != plan.part_inputs.end())
    throw UsageError("--resume cannot be used with standard input (-): it cannot be read again");
  if (o.labels.classes_from_dirs && o.labels.classes.empty()) {
    std::vector<std::string> notes;  // said once the output exists (open_output)
    InputReaderOptions ro = reader_options(o, plan);
    ro.exclude = output_inside_inputs(o.source.inputs, o.output, notes);
    try {
      o.labels.classes = class_folders(o, ro);
    } catch (const StopSignal& s) {
      throw ConvertStopped("stopped by " + signal_name(s.signal()), s.signal(),
                           checkpoint_samples(staging));
    }
  }
  if (!o.table.path.empty()) {
    TableOptions table_options = o.table.options;
    // One flag for a label, in a file or a cell.
    table_options.max_cell_bytes = o.limits.max_label_size;
    if (remote::is_remote(o.table.path) && !plan.remote)
      plan.remote = std::make_shared<const remote::RemoteConfig>(
          remote::RemoteConfig::from_environment(o.source.endpoint_url));
    Table table = [&] {
      try {
        return read_table(o.table.path, table_options, plan.remote.get(), o.run.stop);
      } catch (const FatalError&) {  // a download or command that a stop request ended
        if (o.run.stop && o.run.stop->requested())
          throw ConvertStopped("stopped by " + signal_name(o.run.stop->signal.load()),
                               o.run.stop->signal.load(), checkpoint_samples(staging));
        throw;
      }
    }();
    plan.table_metadata =
        format::table_metadata_text(table_format_name(table.format), table.metadata);
    check_table_geometry(table, o.transform);
    plan.table.emplace(std::move(table), o.table.prefix, o.members.dense);
  }
  plan.fingerprint =
      run_fingerprint(o, plan.part_inputs, plan.table ? &plan.table->table() : nullptr);
  // Each reference verified now, before the output is touched (--overwrite), and recorded by
  // its annotation file's CRC-32, so that a --resume refuses a reference replaced since.
  if (!o.dedup.against.empty())
    plan.fingerprint["dedup_against"] = dedup_references(o.dedup.against, o.output);
  plan.recipe = sample_recipe(o);  // the class folders are found by now
  plan.writer = writer_spec(o);
  plan.feed = feed_spec(o);
  plan.recorder = recorder_spec(o);
  plan.remote_output = remote_output_spec(o);
  plan.manifest = manifest_spec(o);
  plan.inputs = o.source.inputs;
  plan.output = o.output;
  plan.lock_record = lock_record(o);
  plan.reader = reader_options(o, plan);
  plan.run = o.run;
  return plan;
}

}  // namespace tarmac
