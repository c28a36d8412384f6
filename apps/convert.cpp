// tarmac convert: flags -> ConvertOptions -> tarmac::convert() -> summary + exit code.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/convert_flags.h"
#include "apps/errors.h"
#include "apps/progress.h"
#include "apps/signals.h"
#include "common/bytes.h"
#include "common/error.h"
#include "convert/convert.h"
#include "convert/run_report.h"
#include "format/names.h"
#include "read/dataset_summary.h"
#include "remote/url.h"

namespace tarmac::cli {
namespace {

bool is_s3_output(const ConvertOptions& o) {
  return o.output.starts_with("s3://");
}

// Where the run writes locally: the output directory, or an s3:// output's checkpoint folder.
std::string local_output(const ConvertOptions& o) {
  if (!is_s3_output(o)) return o.output;
  try {
    return remote_checkpoint_dir(o.output, o.remote_output.checkpoint_dir);
  } catch (const std::exception&) {
    return o.remote_output.checkpoint_dir;
  }
}

// The text summary of a finished conversion, on stdout.
void print_summary(const ConvertResult& r, const ConvertOptions& o) {
  std::printf("converted %llu samples into %s in %.1f s (%.0f samples/s)\n",
              static_cast<unsigned long long>(r.samples), o.output.c_str(), r.seconds,
              samples_per_second(r));
  std::printf("  %llu shard(s), %s of images; %s %s; read %s\n",
              static_cast<unsigned long long>(r.shards), format_bytes(r.image_bytes).c_str(),
              format::kLabelsFile, format_bytes(r.annotation_bytes).c_str(),
              format_bytes(r.input_bytes).c_str());
  const StageTimes& st = r.stages;
  std::printf(
      "  stages: reader busy %.0f%%, workers busy %.0f%% (%d threads), writer busy %.0f%%; "
      "%.2f s finishing after the last sample\n",
      100 * st.reader_busy(), 100 * st.worker_busy(), st.threads, 100 * st.writer_busy(),
      st.finish_seconds);
  const std::string advice = stage_advice(st);
  if (!advice.empty()) std::printf("    %s\n", advice.c_str());
  if (r.uploaded_objects || r.upload_skipped)
    std::printf(
        "  uploaded %llu object(s) (%llu multipart), %s; %llu request(s) retried; %llu already "
        "complete on the server\n",
        static_cast<unsigned long long>(r.uploaded_objects),
        static_cast<unsigned long long>(r.uploaded_multipart),
        format_bytes(r.uploaded_bytes).c_str(), static_cast<unsigned long long>(r.upload_retries),
        static_cast<unsigned long long>(r.upload_skipped));
  if (r.remote_retries)
    std::printf("  network: %llu request(s) retried, resumed by range past %s already read\n",
                static_cast<unsigned long long>(r.remote_retries),
                format_bytes(r.remote_resumed_bytes).c_str());
  for (const auto& e : r.input_errors) std::printf("  INPUT ERROR: %s\n", e.c_str());
  if (r.skipped_samples || r.error_members || r.ignored_members)
    std::printf(
        "  skipped %llu sample(s) and %llu member(s); ignored %llu member(s) (all listed in "
        "%s)\n",
        static_cast<unsigned long long>(r.skipped_samples),
        static_cast<unsigned long long>(r.error_members),
        static_cast<unsigned long long>(r.ignored_members), format::kManifestFile);
  if (r.duplicates)
    std::printf(
        "  left out %llu duplicate sample(s) or member(s) under --on-duplicate %s "
        "(all listed in %s)\n",
        static_cast<unsigned long long>(r.duplicates), on_duplicate_name(o.members.on_duplicate),
        format::kManifestFile);
  if (o.dedup.enabled())
    std::printf(
        "  dedup: left out %llu duplicate image(s) by content under --dedup %s (all "
        "listed in %s, code duplicate_content)\n",
        static_cast<unsigned long long>(r.duplicate_content_samples),
        o.dedup.mode == DedupOptions::Mode::Exact
            ? "exact"
            : ("near:" + std::to_string(o.dedup.distance)).c_str(),
        format::kManifestFile);
  for (const auto& s : r.skipped)
    std::printf("    skipped %s (%s): %s\n", s.what.c_str(), s.input.c_str(), s.reason.c_str());
  if (o.transform.geometry.resize == ResizeMode::Bucket && !o.members.no_images && !is_s3_output(o))
    std::printf("  buckets: %s\n", sizes_text(summarize_dataset(o.output, true)).c_str());
  std::printf("  schema:\n");
  for (size_t i = 0; i < r.schema.size(); ++i) {
    const FieldSpec& fs = r.schema[i];
    std::string missing;
    if (fs.nullable && i < r.missing_values.size())
      missing = "  nullable: " + std::to_string(r.missing_values[i]) + " of " +
                std::to_string(r.samples) + " without a value";
    std::printf("    %-24s %-8s %-5s %-12s%s  from .%s%s\n", fs.name.c_str(),
                std::string(kind_name(fs.kind)).c_str(), std::string(dtype_name(fs.dtype)).c_str(),
                shape_text(fs.shape).c_str(), fs.ragged ? " ragged" : "", fs.source.c_str(),
                missing.c_str());
  }
}

// The command to go on after a stop: this one with --resume (and, past a bad sample,
// --on-error skip in place of fail).
std::string resume_command(std::vector<std::string> argv, bool skip_bad_sample) {
  bool has_resume = false, has_on_error = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    has_resume |= argv[i] == "--resume";
    if (skip_bad_sample && argv[i] == "--on-error" && i + 1 < argv.size()) {
      argv[i + 1] = "skip";
      has_on_error = true;
    } else if (skip_bad_sample && argv[i].starts_with("--on-error=")) {
      argv[i] = "--on-error=skip";
      has_on_error = true;
    }
  }
  if (!has_resume) argv.emplace_back("--resume");
  if (skip_bad_sample && !has_on_error) {
    argv.emplace_back("--on-error");
    argv.emplace_back("skip");
  }
  return command_text(argv);
}

// A run that ended early: what stopped it, what it kept, how to go on; the exit status. All
// as errors, which -q still prints: the command did not do what it was asked.
int report_stop(const ConvertStopped& e, const ConvertOptions& o, const GlobalFlags& g) {
  const std::string partial =
      (std::filesystem::path(local_output(o)) / format::kStagingDir).string();
  spdlog::error("{}", e.what());
  // A local output may still hold the dataset an --overwrite run was to replace (replaced only
  // when the run completes): said as such, never "no dataset" over a good one.
  std::error_code ec;
  const bool old_dataset =
      !remote::is_remote(o.output) &&
      std::filesystem::exists(std::filesystem::path(o.output) / format::kLabelsFile, ec);
  const std::string holds =
      old_dataset ? "'" + o.output + "' still holds the dataset that was there before this run"
                  : "nothing in '" + o.output + "' looks like a dataset yet";
  if (!e.kept_samples()) {
    spdlog::error("nothing was kept; {}", holds);
  } else if (*e.kept_samples() == 0 && !e.bad_sample()) {
    spdlog::error("no sample had been converted yet: run the same command again to start over");
  } else {
    spdlog::error("{} converted sample(s) are kept in '{}' (a checkpoint); {}", *e.kept_samples(),
                  partial, holds);
    if (e.bad_sample())
      spdlog::error(
          "fix the sample and run the same command with --resume, or go on past it, leaving it "
          "out: {}",
          resume_command(g.argv, true));
    else
      spdlog::error("to go on from there{}: {}", e.signal() ? "" : " once the cause is fixed",
                    resume_command(g.argv, false));
    spdlog::error("to start again instead, run the command with --overwrite");
  }
  return error_exit_code(e);
}

}  // namespace

Runner setup_convert(CLI::App& app, const GlobalFlags& g) {
  auto f = std::make_shared<ConvertFlags>();
  add_convert_flags(app, *f);
  return [f, &g, &app]() -> int {
    ConvertOptions o;
    try {
      o = convert_options(*f);
      o.provenance.command_line = g.argv;
      o.provenance.options_json = options_json(app, o.run.threads);
    } catch (const CLI::Error& e) {
      spdlog::error("{}", e.what());
      return kUsageError;
    }
    if (std::find(o.source.inputs.begin(), o.source.inputs.end(), "-") != o.source.inputs.end() &&
        ::isatty(STDIN_FILENO)) {
      spdlog::error(
          "standard input ('-') is a terminal: pipe an archive in (e.g. 'cat data.tar | tarmac "
          "convert - -o out') or name the archives and directories to read");
      return kUsageError;
    }
    o.run.stop = &stop_on_signals();
    ConvertProgress progress;
    o.run.progress = &progress;
    ProgressDisplay display(progress_mode(f->progress, g.verbosity < 0, ::isatty(STDERR_FILENO)),
                            f->progress_every, [&progress] { return snapshot_of(progress); });
    if (is_s3_output(o) && g.verbosity >= 0)
      spdlog::info(
          "staging and checkpointing in '{}' (--checkpoint-dir): each shard is uploaded "
          "to {} as it completes, the manifest last",
          local_output(o), o.output);
    ConvertResult r;
    try {
      r = convert(o);
    } catch (const ConvertStopped& e) {
      display.finish(false);
      return report_stop(e, o, g);
    } catch (const FatalError& e) {  // before it started: usage (2) or data (1)
      display.finish(false);
      spdlog::error("{}", e.what());
      return error_exit_code(e);
    } catch (const std::bad_alloc&) {  // before it started (the table, the scans)
      display.finish(false);
      spdlog::error("{}", out_of_memory_text(progress.phase.load()));
      return kDataError;
    }
    display.finish(!r.already_complete);
    for (const auto& n : r.notes) spdlog::info("{}", n);
    if (r.already_complete) {
      spdlog::info("nothing to resume: '{}' already holds a complete dataset", o.output);
      if (g.json) print_json({{"output", o.output}, {"already_complete", true}});
      return kOk;
    }
    if (r.resumed)
      spdlog::info("resumed an interrupted run: {} sample(s) were already converted",
                   r.resumed_samples);
    for (const auto& e : r.input_errors) spdlog::warn("input not read to its end: {}", e);
    if (r.samples == 0)
      spdlog::warn("no samples were converted (--allow-empty): the dataset in '{}' is empty",
                   o.output);
    for (const auto& w : r.field_warnings) spdlog::warn("{}", w);
    if (const std::string advice = skip_advice(r); !advice.empty()) spdlog::warn("{}", advice);
    if (g.json)
      print_json(result_json(r, o.output));
    else if (g.verbosity >= 0)
      print_summary(r, o);
    return kOk;
  };
}

}  // namespace tarmac::cli
