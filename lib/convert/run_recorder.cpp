#include "convert/run_recorder.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "convert/checkpoint.h"
#include "format/names.h"
#include "write/file_util.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using Kind = format::ProvenanceEntry::Kind;

namespace {

// The log `index` of a checkpoint: cut back to where it was, or new.
std::optional<uint64_t> log_mark(const format::Checkpoint* resume, size_t index) {
  if (!resume) return std::nullopt;
  return resume->logs.at(index);
}

}  // namespace

RunRecorder::RunRecorder(RecorderSpec spec, fs::path staging, json fingerprint,
                         const format::Checkpoint* resume, const InputReader& reader,
                         DatasetWriter& writer)
    : spec_(std::move(spec)),
      staging_(std::move(staging)),
      fingerprint_(std::move(fingerprint)),
      reader_(reader),
      writer_(writer),
      skipped_(staging_ / format::kSkippedLog, log_mark(resume, 0)),
      ignored_(staging_ / format::kIgnoredLog, log_mark(resume, 1)),
      duplicates_(staging_ / format::kDuplicatesLog, log_mark(resume, 2)) {
  if (spec_.dedup.enabled()) {
    std::optional<uint64_t> dedup_mark;
    if (resume) {
      if (!resume->dedup)
        throw FatalError("cannot resume: the checkpoint in '" + staging_.string() +
                         "' has no --dedup index; run again with --overwrite");
      dedup_mark = *resume->dedup;
    }
    // The references as the fingerprint recorded them when the run (or the one it resumes,
    // whose fingerprint check_resumable found equal) began.
    std::vector<std::string> against_crc32;
    for (const auto& r : fingerprint_.value("dedup_against", json::array()))
      against_crc32.push_back(r.value("labels_crc32", ""));
    dedup_ = std::make_unique<DedupIndex>(
        spec_.dedup.mode == DedupOptions::Mode::Near, spec_.dedup.distance, spec_.dedup.against,
        staging_ / format::kDedupIndexFile, dedup_mark, against_crc32);
  }
  if (!resume) return;
  entries_done_ = resume->entries;
  resume_read_ = resume->read;
  counts_.skipped_samples = resume->counts.skipped_samples;
  counts_.ignored_members = resume->counts.ignored_members;
  counts_.duplicates = resume->counts.duplicates;
  counts_.no_instance_samples = resume->counts.no_instance_samples;
  counts_.duplicate_content_samples = resume->counts.duplicate_content_samples;
}

void RunRecorder::write_checkpoint() {
  format::Checkpoint c;
  c.run = fingerprint_;
  c.entries = entries_done_;
  c.read = mark_from_run_ ? std::optional(read_position(mark_, reader_.inputs())) : resume_read_;
  c.writer = writer_.checkpoint();
  c.logs = {skipped_.checkpoint(), ignored_.checkpoint(), duplicates_.checkpoint()};
  c.counts = {counts_.skipped_samples, counts_.ignored_members, counts_.duplicates,
              counts_.no_instance_samples, counts_.duplicate_content_samples};
  if (dedup_) c.dedup = dedup_->checkpoint();
  write_file_atomic((staging_ / format::kCheckpointFile).string(), format::checkpoint_text(c));
  last_checkpoint_ = Clock::now();
  if (on_checkpoint_) on_checkpoint_();
}

// After each entry: a checkpoint when a shard was closed, or when one is due.
void RunRecorder::entry_done() {
  ++entries_done_;
  if (writer_.take_shard_closed() ||
      Clock::now() - last_checkpoint_ >= std::chrono::duration<double>(spec_.checkpoint_seconds))
    write_checkpoint();
}

namespace {

// True when the entry holds a bad sample (an instance-less sample is not one).
bool has_bad_sample(const Entry& entry) {
  if (!entry.reader_error.empty()) return true;
  if (!entry.done) return false;
  auto bad = [](const ProcessedSample& s) {
    return !s.error.empty() && s.error_code != ErrorCode::NoInstances;
  };
  if (bad(*entry.done)) return true;
  return std::any_of(entry.done->more.begin(), entry.done->more.end(), bad);
}

}  // namespace

void RunRecorder::handle(Entry& entry) {
  ProcessedSample* s = entry.done ? &*entry.done : nullptr;
  const std::string& input_path = reader_.inputs()[s ? s->input : entry.raw.input].path;
  if (!spec_.skip_errors && !entry.raw.dropped && has_bad_sample(entry)) {
    // A bad sample stops the run (--on-error fail). Everything before it is checkpointed first,
    // so that `--resume --on-error skip` goes on past it without redoing anything.
    write_checkpoint();
  }
  mark_ = entry.mark;  // the checkpoints from here on cover this entry
  mark_from_run_ = true;
  for (const DuplicateNote& d : entry.raw.duplicates) {
    format::ProvenanceEntry e = format::provenance_entry(
        input_path, Kind::Sample, entry.raw.key,
        d.member.empty() ? ErrorCode::DuplicateKey : ErrorCode::DuplicateMember, d.reason);
    e.member = d.member;
    e.kept = spec_.inputs[d.kept_input];
    duplicates_.add(to_json(e));
    ++counts_.duplicates;
  }
  if (entry.raw.dropped) {
    entry_done();
    return;
  }
  if (!entry.reader_error.empty()) {
    record_bad(input_path, entry.raw.key, entry.reader_error, entry.reader_error_code);
  } else if (s) {
    for (const IgnoredMember& m : s->ignored) {
      ignored_.add(
          to_json(format::provenance_entry(input_path, Kind::Member, m.member, m.code, m.reason)));
      ++counts_.ignored_members;
    }
    store(input_path, *s);
    for (ProcessedSample& more : s->more) store(input_path, more);
  }
  entry_done();
}

// One output: stored, or recorded as bad (or as a sample without instances).
void RunRecorder::store(const std::string& input_path, ProcessedSample& s) {
  if (s.error_code == ErrorCode::NoInstances) {
    ignored_.add(
        to_json(format::provenance_entry(input_path, Kind::Sample, s.key, s.error_code, s.error)));
    ++counts_.no_instance_samples;
    return;
  }
  for (const auto& [field, source] : s.image_sized_labels) {
    if (std::find(image_sized_warned_.begin(), image_sized_warned_.end(), field) !=
        image_sized_warned_.end())
      continue;
    image_sized_warned_.push_back(field);
    counts_.field_warnings.push_back(
        "field '" + field + "' (from ." + source + " members such as in sample '" + s.key +
        "') has the image's height and width but is stored as a label, not cropped or resized "
        "with the image; if it is a dense map, pass --dense " +
        source + " to warp it with the image (it is then stored beside it in the shards)");
  }
  for (const auto& [field, flag] : s.undeclared_geometry) {
    if (std::find(geometry_warned_.begin(), geometry_warned_.end(), field) !=
        geometry_warned_.end())
      continue;
    geometry_warned_.push_back(field);
    counts_.field_warnings.push_back(
        "field '" + field + "' (as in sample '" + s.key +
        "') looks geometric but is stored as it was, not moved with the cropped or resized "
        "image; if it is in image coordinates, declare it with " +
        flag + " " + field + " (docs/cli.md, \"Geometric labels\")");
  }
  std::string error = s.error;
  ErrorCode code = s.error_code;
  if (error.empty()) {
    try {
      if (drop_duplicate(input_path, s)) return;
      writer_.add(s);
      if (dedup_ && s.content) dedup_->add(s.key, *s.content);
    } catch (const SampleError& e) {
      error = e.what();
      code = e.code();
    }
  }
  if (!error.empty()) record_bad(input_path, s.key, error, code);
}

bool RunRecorder::drop_duplicate(const std::string& input_path, ProcessedSample& s) {
  if (!dedup_ || !s.content) return false;
  if (const auto m = dedup_->find(*s.content)) {
    const std::string of =
        "'" + m->key + "'" + (m->dataset.empty() ? "" : " of '" + m->dataset + "'");
    format::ProvenanceEntry e = format::provenance_entry(
        input_path, Kind::Sample, s.key, ErrorCode::DuplicateContent,
        m->same_pixels ? "the same decoded pixels as " + of + " (--dedup)"
                       : "a near duplicate of " + of + ": perceptual hashes " +
                             std::to_string(m->distance) + " bits apart (--dedup)");
    e.extras["duplicate_of"] = m->key;
    if (!m->dataset.empty()) e.extras["duplicate_of_dataset"] = m->dataset;
    e.extras["distance"] = m->distance;
    if (counts_.first_duplicate_content.empty())
      counts_.first_duplicate_content = "sample '" + s.key + "': " + e.reason;
    ignored_.add(to_json(e));
    ++counts_.duplicate_content_samples;
    return true;
  }
  FieldValue v;
  v.dtype = DType::U64;
  v.data.resize(sizeof(uint64_t));
  std::memcpy(v.data.data(), &s.content->phash, sizeof(uint64_t));
  for (const SampleField& f : s.fields)
    if (f.name == format::kPhashField)
      throw SampleError("label field '" + f.name + "' (member '" + f.member +
                            "') has the name --dedup stores each image's perceptual hash under; "
                            "rename it or drop it (--drop-fields " +
                            f.name + ")",
                        ErrorCode::BadField);
  s.fields.push_back({format::kPhashField, "", "dedup", std::move(v)});
  return false;
}

void RunRecorder::record_bad(const std::string& input_path, const std::string& key,
                             const std::string& error, ErrorCode code) {
  if (!spec_.skip_errors) {
    // Streaming, the run cannot know whether any later sample has an image; it can say that
    // none before this one had.
    const char* hint = code == ErrorCode::NoImage && writer_.samples() == 0
                           ? ". No sample before it had an image either: if the input has "
                             "no images at all, pass --no-images"
                           : "";
    throw BadSampleError("'" + input_path + "', sample '" + key + "': " + error + hint);
  }
  ++counts_.skipped_samples;
  skipped_.add(to_json(format::provenance_entry(input_path, Kind::Sample, key, code, error)));
}

RunRecorder::Lists RunRecorder::read_all() {
  // The logs are this run's own staging files (and an interrupted run's, checkpointed), read
  // back through the one parser: an entry damaged on disk is an error here, not a manifest's.
  const auto entries = [](JsonLog& log, const char* list) {
    std::vector<format::ProvenanceEntry> out;
    const nlohmann::ordered_json all = log.read_all();
    out.reserve(all.size());
    for (size_t i = 0; i < all.size(); ++i)
      out.push_back(format::parse_provenance_entry(
          all[i], "entry " + std::to_string(i) + " of \"" + list + "\""));
    return out;
  };
  return {entries(skipped_, "skipped"), entries(ignored_, "ignored"),
          entries(duplicates_, "duplicates")};
}

}  // namespace tarmac
