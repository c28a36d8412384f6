#include "convert/run_report.h"

#include <algorithm>
#include <cstdio>

#include "common/dtype.h"
#include "format/field_spec.h"
#include "format/json_object.h"

namespace tarmac {

StageLimit stage_limit(const StageTimes& st) {
  constexpr double kLimit = 0.85;
  const double reader = st.reader_busy(), workers = st.worker_busy(), writer = st.writer_busy();
  if (workers >= kLimit && workers >= reader) return StageLimit::Workers;
  // Samples wait in the group window until it fills; where none could be converted ahead
  // (members not adjacent), the workers of a run not much larger than the window start late.
  if (reader >= kLimit && st.ahead_samples == 0 &&
      st.first_release_seconds >= 0.5 * st.reader_seconds)
    return StageLimit::Window;
  if (reader >= kLimit && reader >= writer) return StageLimit::Reader;
  if (writer >= kLimit) return StageLimit::Writer;
  return StageLimit::None;
}

const char* stage_limit_name(StageLimit limit) {
  switch (limit) {
    case StageLimit::Workers:
      return "workers";
    case StageLimit::Window:
      return "window";
    case StageLimit::Reader:
      return "reader";
    case StageLimit::Writer:
      return "writer";
    case StageLimit::None:
      break;
  }
  return "";
}

double samples_per_second(const ConvertResult& r) {
  const uint64_t converted = r.samples - std::min(r.resumed_samples, r.samples);
  return r.seconds > 0 ? static_cast<double>(converted) / r.seconds : 0;
}

std::string skip_advice(const ConvertResult& r) {
  if (r.samples == 0 && r.skipped_samples > 0 && r.no_image_samples == r.skipped_samples)
    return "every sample was skipped for want of an image member: if the input has no images at "
           "all, pass --no-images";
  return "";
}

std::string empty_run_reason(const ConvertResult& r, uint64_t members, OnDuplicate on_duplicate,
                             const DedupOptions& dedup, const PartOptions& part) {
  std::string why;
  if (r.skipped_samples > 0) {
    why = "all " + std::to_string(r.skipped_samples) + " sample(s) were skipped as bad";
    if (!r.skipped.empty())
      why += " (the first: '" + r.skipped[0].input + "', sample '" + r.skipped[0].what +
             "': " + r.skipped[0].reason + ")";
    if (const std::string advice = skip_advice(r); !advice.empty()) why += "; " + advice;
  } else if (r.duplicates > 0) {
    why = "every sample was left out as a duplicate (--on-duplicate " +
          std::string(on_duplicate_name(on_duplicate)) + ")";
  } else if (r.duplicate_content_samples > 0) {
    // Within one run the first copy is kept: every sample gone means they duplicate the
    // --dedup-against datasets (or, resumed, the samples the interrupted run kept).
    std::string refs;
    for (const auto& d : dedup.against) refs += (refs.empty() ? "'" : ", '") + d + "'";
    why =
        "all " + std::to_string(r.duplicate_content_samples) +
        " sample(s) were left out as content duplicates (--dedup " +
        (dedup.mode == DedupOptions::Mode::Exact ? std::string("exact")
                                                 : "near:" + std::to_string(dedup.distance)) +
        ") of " +
        (refs.empty() ? std::string("samples kept before") : "samples of --dedup-against " + refs);
    if (!r.first_duplicate_content.empty())
      why += " (the first: " + r.first_duplicate_content + ")";
    why += ": the input holds no sample the output does not already have";
  } else if (members == 0) {
    why = "the input holds no member (an empty archive, directory or standard input)";
  } else if (part.count > 1) {
    why = "part " + std::to_string(part.index) + "/" + std::to_string(part.count) +
          " of the input holds no sample";
  } else {
    why = "none of the input's " + std::to_string(members) + " member(s) made a sample";
    if (r.ignored_members || r.error_members)
      why += " (" + std::to_string(r.ignored_members + r.error_members) +
             " ignored or refused: hidden files, names without an extension, links, ...)";
  }
  for (const auto& e : r.input_errors) why += "; input not read to its end: " + e;
  return why;
}

std::string stage_advice(const StageTimes& st) {
  switch (stage_limit(st)) {
    case StageLimit::Workers:
      return "the limit: the transform workers (decoding, cropping, encoding); more --threads "
             "help while cores are free";
    case StageLimit::Reader: {
      std::string advice =
          "the limit: reading the input (one thread reads, decompresses and checksums it); "
          "more --threads will not help: split the input into parts (--shard I/N, one "
          "process each)";
      // zstd decompresses fast; an input without compression has nothing to change.
      if (st.input_compression == "gzip")
        advice += " or store it as .tar or .tar.zst instead of .tar.gz";
      else if (!st.input_compression.empty() && st.input_compression != "zstd")
        advice += " or store it as .tar or .tar.zst instead of " + st.input_compression;
      return advice;
    }
    case StageLimit::Window: {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.2f", st.first_release_seconds);
      const std::string held = std::string("the limit: the group window; the workers waited ") +
                               seconds +
                               " s for their first samples, which are held until --group-window "
                               "bytes are waiting and could not be converted ahead ";
      const std::string bound =
          ", so a run whose input is not much larger than the window is bound by reading it; ";
      if (st.members_interleaved)
        return held + "(their members are not adjacent)" + bound +
               "sort the members by name (tar --sort=name) to have them converted while the "
               "window fills";
      // Adjacent members, in samples too small to be worth converting ahead (kAheadMinBytes).
      return held + "(each is too small to be worth it)" + bound +
             "its members are adjacent, so a smaller --group-window (e.g. 4M) lets the workers "
             "start sooner";
    }
    case StageLimit::Writer:
      return "the limit: writing the output (labels and shards, in order); check the output "
             "disk's speed";
    case StageLimit::None:
      break;
  }
  return "";
}

nlohmann::ordered_json result_json(const ConvertResult& r, const std::string& output) {
  nlohmann::ordered_json j;
  j["output"] = output;
  j["samples"] = r.samples;
  j["resumed_samples"] = r.resumed_samples;
  j["skipped_samples"] = r.skipped_samples;
  j["skipped_members"] = r.error_members;
  j["ignored_members"] = r.ignored_members;
  j["duplicates"] = r.duplicates;
  j["duplicate_content_samples"] = r.duplicate_content_samples;
  j["shards"] = r.shards;
  j["image_bytes"] = r.image_bytes;
  j["annotation_bytes"] = r.annotation_bytes;
  j["input_bytes"] = r.input_bytes;
  j["remote_retries"] = r.remote_retries;
  j["remote_resumed_bytes"] = r.remote_resumed_bytes;
  if (output.starts_with("s3://"))
    j["uploads"] = {{"objects", r.uploaded_objects},
                    {"multipart", r.uploaded_multipart},
                    {"bytes", r.uploaded_bytes},
                    {"retries", r.upload_retries},
                    {"already_complete", r.upload_skipped}};
  j["seconds"] = r.seconds;
  j["samples_per_second"] = samples_per_second(r);
  // The schema exactly as the annotation file's metadata has it; then what it cannot say.
  j["schema"] = schema_json(r.schema);
  nlohmann::ordered_json missing = nlohmann::ordered_json::object();
  for (size_t i = 0; i < r.schema.size() && i < r.missing_values.size(); ++i)
    if (r.schema[i].nullable)
      format::append_new_key(missing, r.schema[i].name, r.missing_values[i]);
  j["missing_values"] = missing;
  j["field_warnings"] = r.field_warnings;
  j["input_errors"] = r.input_errors;
  j["notes"] = r.notes;
  const StageTimes& st = r.stages;
  j["stages"] = {{"threads", st.threads},
                 {"reader_seconds", st.reader_seconds},
                 {"reader_blocked_seconds", st.reader_blocked_seconds},
                 {"worker_seconds", st.worker_seconds},
                 {"worker_idle_seconds", st.worker_idle_seconds},
                 {"writer_seconds", st.writer_seconds},
                 {"writer_idle_seconds", st.writer_idle_seconds},
                 {"finish_seconds", st.finish_seconds},
                 {"first_release_seconds", st.first_release_seconds},
                 {"ahead_samples", st.ahead_samples},
                 {"reader_busy", st.reader_busy()},
                 {"worker_busy", st.worker_busy()},
                 {"writer_busy", st.writer_busy()},
                 {"limit", stage_limit_name(stage_limit(st))}};
  return j;
}

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

std::string out_of_memory_text(ConvertProgress::Phase phase) {
  return std::string("out of memory while ") + phase_text(phase) +
         " (std::bad_alloc): a run's memory is bounded per thread by --threads, "
         "--max-member-size, --max-pixels and --max-label-size, and as a whole by "
         "--group-window and --max-table-size (docs/cli.md, Memory bounds): lower them, or free "
         "memory";
}

}  // namespace tarmac
