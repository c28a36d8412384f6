#include "convert/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/crc32.h"
#include "common/error.h"
#include "common/version.h"
#include "convert/table_input.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/shard_list.h"
#include "remote/url.h"
#include "source/pipe_stream.h"
#include "write/file_util.h"
#include "write/output_lock.h"
#include "write/staging.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace format;

Checkpoint load_checkpoint(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw FatalError("cannot resume from '" + path.string() + "': it cannot be read");
  try {
    return parse_checkpoint(text.str());
  } catch (const ParseError& e) {
    throw FatalError("cannot resume from '" + path.string() + "': " + e.what() +
                     ": run again with --overwrite to start over");
  }
}

std::optional<uint64_t> checkpoint_samples(const fs::path& staging) {
  std::error_code ec;
  if (!fs::is_regular_file(staging / kCheckpointFile, ec)) return std::nullopt;
  try {
    return load_checkpoint(staging / kCheckpointFile).writer.samples;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

bool is_dataset_file_name(const std::string& name) {
  return is_shard_name(name) || name == kLabelsFile || name == kManifestFile ||
         name == kShardListFile;
}

// The files of the complete dataset in `out`, by its own record: the shards its manifest
// lists, the shard list, the manifest and the annotation file. What --overwrite replaces.
std::vector<std::string> dataset_files(const fs::path& out) {
  std::vector<std::string> files{kLabelsFile, kManifestFile, kShardListFile};
  const auto unreadable = [&](const std::string& why) {
    return FatalError("--overwrite: the dataset in '" + out.string() + "' has " + why +
                      ", so tarmac cannot tell which files are its own and replaces none; "
                      "remove the old dataset yourself, or choose another output directory");
  };
  std::optional<Manifest> m;
  try {
    m = read_manifest(out);  // a name that is not a plain shard name is a ParseError
  } catch (const ParseError& e) {
    throw unreadable("a " + std::string(e.what()));
  }
  if (!m) throw unreadable("no readable " + std::string(kManifestFile));
  for (auto& name : manifest_shard_names(*m)) files.push_back(std::move(name));
  return files;
}

// A file a new dataset would be written over that no dataset in `out` owns (a name like a
// shard's, or the manifest's) is the user's: refused, whatever the flags.
void refuse_foreign_files(const fs::path& out, const std::vector<std::string>& owned) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_dataset_file_name(name)) continue;
    if (std::find(owned.begin(), owned.end(), name) != owned.end()) continue;
    throw FatalError("output directory '" + out.string() + "' holds '" + name +
                     "', which no dataset there lists as its own; --overwrite replaces only an "
                     "old dataset's files. Move it away, or choose another output directory");
  }
}

}  // namespace

void refuse_inputs_inside_output(const ConvertOptions& o) {
  std::error_code ec;
  fs::path out = fs::weakly_canonical(o.output, ec);
  if (ec) return;
  if (out.filename().empty()) out = out.parent_path();  // "raw/" names the folder "raw"
  std::vector<std::string> inputs = o.source.inputs;
  if (!o.table.path.empty()) inputs.push_back(o.table.path);
  for (const auto& in : inputs) {
    if (in == "-" || is_pipe(in) || remote::is_remote(in)) continue;  // not a local path
    const fs::path path = fs::weakly_canonical(in, ec);
    if (ec) continue;
    const bool inside =
        std::mismatch(out.begin(), out.end(), path.begin(), path.end()).first == out.end();
    if (inside && path != out)
      throw FatalError("input '" + in + "' is inside the output directory '" + o.output +
                       "': writing the dataset there could replace it. Choose an output "
                       "directory that holds no input (e.g. -o converted/)");
  }
}

void refuse_inputs_inside_remote_output(const ConvertOptions& o, const std::string& destination) {
  const remote::S3Location out = remote::parse_s3(destination);
  std::string out_prefix = out.key;  // "" for the whole bucket
  if (!out_prefix.empty() && !out_prefix.ends_with('/')) out_prefix += '/';
  std::vector<std::string> inputs = o.source.inputs;
  if (!o.table.path.empty()) inputs.push_back(o.table.path);
  for (const auto& in : inputs) {
    if (!remote::is_s3(in)) continue;
    for (const auto& name : remote::expand_braces(in)) {
      const remote::S3Location loc = remote::parse_s3(name);
      if (loc.bucket != out.bucket) continue;
      const bool listed = loc.key.empty() || loc.key.ends_with('/');
      if (loc.key.starts_with(out_prefix))
        throw FatalError("input '" + in + "' is inside the output prefix '" + destination +
                         "': writing the dataset there could replace it. Choose an output "
                         "prefix that holds no input (e.g. -o s3://" +
                         out.bucket + "/converted/)");
      if (listed && out_prefix.starts_with(loc.key))
        throw FatalError("the output prefix '" + destination + "' is inside the input prefix '" +
                         in +
                         "': its listing would read the dataset being written there as input. "
                         "Choose an output prefix outside every input prefix (beside it, or in "
                         "another bucket)");
    }
  }
}

// Gets the output directory ready. Returns the checkpoint to resume from (--resume, when an
// interrupted run left one), with every file the checkpoint names back in the staging
// directory; says when --resume finds a finished dataset and nothing to do, and which files
// of an old dataset --overwrite replaces.
PreparedOutput prepare_output(const ConvertOptions& o, const fs::path& out,
                              const fs::path& staging) {
  PreparedOutput r;
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec))
      throw FatalError("output '" + out.string() + "' exists and is not a directory");
    const bool has_labels = fs::exists(out / kLabelsFile, ec);
    if (o.run.resume && fs::exists(staging / kCheckpointFile, ec) &&
        (!has_labels || o.run.overwrite)) {
      Checkpoint cp = load_checkpoint(staging / kCheckpointFile);
      const std::vector<std::string> names = cp.writer.shards;
      // What the run may have published (its checkpoint's shards, then its manifest) and the
      // old dataset --overwrite replaces are its own; a file named so besides is the user's,
      // put there since the kill: refused, as a new run refuses it.
      std::vector<std::string> owned = names;
      // (the manifest and shard list go out after every shard)
      if (std::none_of(names.begin(), names.end(),
                       [&](const std::string& n) { return fs::exists(staging / n, ec); }))
        owned.insert(owned.end(), {kManifestFile, kShardListFile});
      if (has_labels)
        for (auto& n : dataset_files(out)) owned.push_back(std::move(n));
      refuse_foreign_files(out, owned);
      // Killed while publishing: the shards already moved out go back in (publish() removes
      // an old dataset's shards before it moves any new one, so these are the run's own).
      for (const auto& n : names)
        if (!fs::exists(staging / n, ec) && fs::exists(out / n, ec))
          atomic_rename((out / n).string(), (staging / n).string());
      if (!has_labels) {  // the run's own: refuse_foreign_files let them by
        fs::remove(out / kManifestFile, ec);
        fs::remove(out / kShardListFile, ec);
      } else {
        r.replaced = dataset_files(out);
      }
      r.checkpoint = std::move(cp);
      return r;
    }
    if (o.run.resume && has_labels) {
      // The annotation file is published last, after every shard left staging: with a shard
      // of the checkpoint still there, it is not the interrupted run's.
      if (fs::is_regular_file(staging / kCheckpointFile, ec)) {
        const Checkpoint cp = load_checkpoint(staging / kCheckpointFile);
        for (const auto& n : cp.writer.shards)
          if (fs::exists(staging / n, ec)) refuse_foreign_files(out, {});
      }
      r.complete = true;
      return r;
    }
    // A plain run never throws converted work away unasked: the user says which they want. A
    // checkpoint of no sample (stopped or failed at once) holds none: the run starts over.
    if (!o.run.resume && !o.run.overwrite && !has_labels)
      if (const auto kept = checkpoint_samples(staging); kept && *kept > 0)
        throw FatalError("'" + out.string() +
                         "' holds an interrupted conversion: " + std::to_string(*kept) +
                         " sample(s) converted and checkpointed in '" + staging.string() +
                         "'. Run the same command with --resume to go on from there, or with "
                         "--overwrite to discard them and start again");
    // A staging directory without the annotation file is a killed run. It may have got as far
    // as publishing some shards (those its last checkpoint and its manifest list: it
    // checkpoints, then writes the manifest, then publishes) and the manifest: those are its
    // files too (format.md); nothing is removed by its name's pattern.
    if (fs::exists(staging, ec) && !has_labels) {
      // A shard it published was moved out of staging by rename: one still in staging, or
      // of another size than the checkpoint's, is not the run's (a user's file named so).
      if (fs::is_regular_file(staging / kCheckpointFile, ec)) try {
          const Checkpoint cp = load_checkpoint(staging / kCheckpointFile);
          const auto& names = cp.writer.shards;
          const auto& sizes = cp.writer.shard_sizes;
          for (size_t i = 0; i < names.size() && i < sizes.size(); ++i)
            if (is_shard_name(names[i]) && !fs::exists(staging / names[i], ec) &&
                fs::file_size(out / names[i], ec) == sizes[i] && !ec)
              fs::remove(out / names[i], ec);
        } catch (const std::exception&) {  // unreadable: its manifest still says
        }
      discard_unfinished_publish(out, staging);
    }
    refuse_foreign_staging(staging);  // only what a run wrote there goes
    fs::remove_all(staging, ec);      // never a dataset
    if (!empty_but_lock(out)) {
      if (!o.run.overwrite)
        throw FatalError("output directory '" + out.string() +
                         "' is not empty; choose a new directory or pass --overwrite");
      if (has_labels) r.replaced = dataset_files(out);
      refuse_foreign_files(out, r.replaced);
    }
  }
  fs::create_directories(staging, ec);
  if (ec)
    throw FatalError("cannot create output directory '" + staging.string() + "': " + ec.message());
  return r;
}

// What must not change between an interrupted run and its --resume: every option that shapes
// the output (not -j, --overwrite or --resume), the part, and each input file's size and
// modification time.
json output_options(const ConvertOptions& o) {
  static constexpr const char* kCrop[] = {"none", "center", "box", "field"};
  static constexpr const char* kResize[] = {"exact", "shorter", "longer", "fit", "none", "bucket"};
  const GeometryOptions& g = o.transform.geometry;
  json crop = {{"mode", kCrop[static_cast<int>(g.crop)]}};
  if (g.crop == CropMode::Box) crop["box"] = {g.box.x0, g.box.y0, g.box.x1, g.box.y1};
  if (g.crop == CropMode::Field)
    crop["field"] = o.transform.crop_field + (o.transform.crop_field_xyxy ? ":xyxy" : ":xywh");
  json boxes = json::array();
  for (const auto& [name, xyxy] : o.transform.boxes)
    boxes.push_back(name + (xyxy ? ":xyxy" : ":xywh"));
  json j = {
      {"--key-rule", key_rule_name(o.members.key_rule)},
      {"--image", o.members.image_exts},
      {"--no-images", o.members.no_images},
      {"--classes-from-dirs", o.labels.classes_from_dirs},
      {"--dense", o.members.dense},
      {"--ragged", o.labels.ragged},
      {"--fields", o.labels.keep_fields},
      {"--drop-fields", o.labels.drop_fields},
      {"--require", o.labels.require_fields},
      {"--crop", crop},
      {"--box-convention", g.box_convention == BoxConvention::Edges ? "edges" : "centers"},
      {"--resample", g.resample == ResampleMode::Area ? "area" : "area-exact"},
      {"--crop-scale", g.crop_scale},
      {"--square", g.square},
      {"--fit-aspect", g.fit_aspect},
      {"--table", o.table.path},
      {"--table-format", table_format_name(o.table.options.format)},
      {"--table-image", o.table.options.image_column},
      {"--table-columns", o.table.options.list_columns},
      {"--table-prefix", o.table.prefix},
      {"--instances", o.labels.instances},
      {"--instance-fields", o.labels.instance_fields},
      {"--size", {g.width, g.height}},
      {"--resize", kResize[static_cast<int>(g.resize)]},
      {"--bucket-step", g.bucket_step},
      {"--bucket-max-ratio", g.bucket_max_ratio},
      {"--points", o.transform.points},
      {"--boxes", boxes},
      {"--pad-value", o.transform.pad_value},
      {"--format",
       o.transform.format == OutputFormat::Keep ? "keep" : format_extension(o.transform.format)},
      {"--quality", o.transform.quality},
      {"--channels", o.transform.channels == ChannelMode::One    ? "1"
                     : o.transform.channels == ChannelMode::Keep ? "keep"
                                                                 : "3"},
      {"--max-pixels", o.limits.max_pixels},
      {"--max-member-size", o.limits.max_member_size},
      {"--max-label-size", o.limits.max_label_size},
      {"--max-outputs-per-sample", o.limits.max_outputs_per_sample},
      {"--group-window", o.limits.group_window},
      {"--shard-size", o.limits.shard_size},
      {"--on-error", o.run.skip_errors ? "skip" : "fail"},
      {"--on-duplicate", on_duplicate_name(o.members.on_duplicate)}};
  // The geometric kinds of #38, only when given (as --dedup below).
  const TransformOptions& t = o.transform;
  if (!t.points3d.empty()) j["--points3d"] = t.points3d;
  if (!t.axis_angle.empty()) {
    json a = json::array();
    for (const auto& f : t.axis_angle) {
      std::string layout = f.layout;
      if (f.layout == "pairs") {
        layout += ":";
        for (size_t i = 0; i < f.pairs.size(); ++i)
          layout += (i ? "," : "") + std::to_string(f.pairs[i].first) + "-" +
                    std::to_string(f.pairs[i].second);
      }
      a.push_back(f.name + ":" + layout);
    }
    j["--axis-angle"] = a;
  }
  if (!t.cameras.empty()) {
    json c = json::array();
    for (const auto& f : t.cameras) c.push_back(f.name + (f.edges ? ":edges" : ":centers"));
    j["--camera"] = c;
  }
  if (!t.polygons.empty()) j["--polygons"] = t.polygons;
  if (!t.masks.empty()) j["--masks"] = t.masks;
  // Only when given, so that the options of a run without it read as before.
  if (o.dedup.enabled())
    j["--dedup"] = o.dedup.mode == DedupOptions::Mode::Exact
                       ? std::string("exact")
                       : "near:" + std::to_string(o.dedup.distance);
  return j;
}

json run_fingerprint(const ConvertOptions& o, const std::vector<std::string>& inputs,
                     const Table* table) {
  const json opts = output_options(o);
  // A file's identity: path, size and modification time.
  auto identity = [](const std::string& path) {
    json j = {{"path", path}};
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      j["size"] = fs::file_size(path, ec);
      j["mtime_ns"] = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               fs::last_write_time(path, ec).time_since_epoch())
                                               .count());
    }
    return j;
  };
  json ins = json::array();
  for (const auto& in : inputs) ins.push_back(identity(in));
  json fp = {{"version", kVersion},
             {"options", opts},
             {"part", {o.part.index, o.part.count}},
             {"inputs", ins}};
  // A directory input's fingerprint is its path only: a class folder added since would shift
  // every index after it.
  if (o.labels.classes_from_dirs) fp["classes"] = o.labels.classes;
  if (!o.table.path.empty()) {
    fp["table"] = identity(o.table.path);
    if (table && table_is_remote_or_pipe(o.table.path)) {
      fp["table"]["size"] = table->bytes;
      fp["table"]["crc32"] = table->crc32;
    }
  }
  // "dedup_against" is added by plan_run once each reference is verified (dedup_references).
  return fp;
}

CheckpointRead read_position(const ReadMark& mark, const std::vector<InputInfo>& inputs) {
  CheckpointRead r{mark.input, mark.bytes, mark.crc32, mark.at_end, {}};
  for (uint32_t j = 0; j < mark.input; ++j)
    r.done.emplace_back(inputs[j].bytes_read, inputs[j].crc32);
  return r;
}

std::optional<ReadExpectation> read_expectation(const Checkpoint& cp) {
  if (!cp.read) return std::nullopt;
  ReadExpectation e;
  e.mark = {cp.read->input, cp.read->bytes, cp.read->crc32, cp.read->end};
  e.done = cp.read->done;
  return e;
}

namespace {
std::string o_table_path(const json& fp) {
  return fp.contains("table") ? fp["table"].value("path", "") : "";
}

// The first option (output_options) `now` gives otherwise than `then`; empty when none.
std::string options_diff(const json& then, const json& now) {
  // --on-error fail -> skip may change: the run stopped at a bad sample goes on past it (the
  // samples before it are the same either way: under fail, none was skipped).
  auto allowed = [&](const std::string& k, const json& v) {
    return k == "--on-error" && then.contains(k) && then[k] == "fail" && v == "skip";
  };
  for (const auto& [k, v] : now.items())
    if (!allowed(k, v) && (!then.contains(k) || then[k] != v))
      return "option " + k + " was " + (then.contains(k) ? then[k].dump() : "not given") +
             ", now " + v.dump();
  for (const auto& [k, v] : then.items())
    if (!now.contains(k)) return "option " + k + " was " + v.dump() + ", now not given";
  return "";
}

// How the --dedup-against references of two fingerprints differ: another list of directories,
// or one replaced or changed in place (its annotation file's CRC-32).
std::string dedup_against_diff(const json& then, const json& now) {
  auto paths = [](const json& refs) {
    std::string out;
    for (const auto& r : refs) out += (out.empty() ? "'" : ", '") + r.value("path", "") + "'";
    return out.empty() ? std::string("none") : out;
  };
  if (then.size() == now.size())
    for (size_t i = 0; i < now.size(); ++i)
      if (then[i].value("path", "") == now[i].value("path", "") && then[i] != now[i])
        return "--dedup-against " + now[i].value("path", "") +
               " changed since the interrupted run: its annotation file's CRC-32 was " +
               then[i].value("labels_crc32", "?") + ", now " + now[i].value("labels_crc32", "?") +
               " (the samples kept so far were compared with the old dataset)";
  return "the --dedup-against datasets were " + paths(then) + ", now " + paths(now);
}
}  // namespace

// Refuses to resume a run whose options or inputs differ from the interrupted one's, naming
// the first difference; then removes from staging whatever came after the checkpoint.
void check_resumable(const Checkpoint& cp, const json& now, const fs::path& staging,
                     const std::vector<std::string>& uploaded) {
  const json& then = cp.run;
  std::string diff;
  if (then.at("version") != now.at("version")) {
    diff = "it was written by tarmac " + then.at("version").get<std::string>();
  } else if (then.at("part") != now.at("part")) {
    diff = "--shard differs";
  } else if (then.value("classes", json()) != now.value("classes", json())) {
    diff = "the class folders (--classes-from-dirs) are not those of the interrupted run: " +
           std::to_string(then.value("classes", json::array()).size()) + " then, " +
           std::to_string(now.value("classes", json::array()).size()) + " now";
  } else if (then.value("table", json()) != now.value("table", json())) {
    diff = "the table '" + o_table_path(now) + "' is not the same " +
           (now["table"].contains("crc32")
                ? std::string("(its size or CRC-32 differ) as the interrupted run's")
                : std::string("file (size or modification time) as the interrupted run's"));
  } else if (then.value("dedup_against", json()) != now.value("dedup_against", json())) {
    diff = dedup_against_diff(then.value("dedup_against", json::array()),
                              now.value("dedup_against", json::array()));
  } else if (then.at("inputs").size() != now.at("inputs").size()) {
    diff = "the number of inputs differs";
  } else {
    for (size_t i = 0; i < now.at("inputs").size() && diff.empty(); ++i)
      if (then["inputs"][i] != now["inputs"][i])
        diff = "input '" + now["inputs"][i].at("path").get<std::string>() +
               "' is not the same file (path, size or modification time) as before";
    if (diff.empty()) diff = options_diff(then.at("options"), now.at("options"));
  }
  if (!diff.empty())
    throw FatalError("cannot resume the interrupted run in '" + staging.parent_path().string() +
                     "': " + diff +
                     ". Resume with the same inputs and options, or run without --resume to "
                     "start again");

  // (parse_checkpoint checked that the closed shards have a size each)
  const auto& names = cp.writer.shards;
  const auto& sizes = cp.writer.shard_sizes;
  std::error_code ec;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (std::find(uploaded.begin(), uploaded.end(), names[i]) != uploaded.end()) continue;
    const uint64_t have = fs::file_size(staging / names[i], ec);
    if (ec || have != sizes[i])
      throw FatalError("cannot resume: shard '" + (staging / names[i]).string() + "' " +
                       (ec ? std::string("is missing")
                           : "holds " + std::to_string(have) + " bytes, the checkpoint recorded " +
                                 std::to_string(sizes[i])) +
                       "; run again without --resume");
  }
  // Shards begun after the checkpoint, and the files of a finish that did not complete.
  for (const auto& e : fs::directory_iterator(staging, ec)) {
    const std::string n = e.path().filename().string();
    const bool listed = std::find(names.begin(), names.end(), n) != names.end();
    if ((is_shard_name(n) && !listed) || n == kLabelsFile || n == kManifestFile ||
        n == kShardListFile || n.ends_with(".tmp"))
      fs::remove(e.path(), ec);
  }
}

namespace {
// What check_complete_resumable compares, `m` read (or not) from the dataset at `where`.
void check_complete_manifest(const std::string& where,
                             const std::function<std::optional<Manifest>()>& read_it,
                             const json& now, const Table* table) {
  const auto refuse = [&](const std::string& why) {
    return FatalError("cannot resume: '" + where +
                      "' holds a complete dataset, but not this run's: " + why +
                      ". Resume with the inputs and options that made it, or run without "
                      "--resume (with --overwrite to replace it)");
  };
  std::optional<Manifest> m;
  try {
    m = read_it();
  } catch (const ParseError& e) {
    throw refuse(std::string("its ") + kManifestFile + " cannot be read (" + e.what() + ")");
  }
  if (!m) throw refuse(std::string("it has no ") + kManifestFile + " to compare with");
  if (m->merged_from)
    throw refuse("it was made by `tarmac merge`, not by one convert (run `tarmac verify` on it)");
  std::string diff;
  const json then_part =
      m->part ? json::array({m->part->index, m->part->count}) : json::array({now.at("part")[0], 1});
  if (!m->output_options) {
    diff = std::string("its ") + kManifestFile + " records no output options";
  } else if (then_part != now.at("part")) {
    diff = "--shard differs (the dataset is part " + then_part[0].dump() + "/" +
           then_part[1].dump() + ")";
  } else if (m->inputs.size() != now.at("inputs").size()) {
    diff = "it was made from " + std::to_string(m->inputs.size()) + " input(s), this run has " +
           std::to_string(now.at("inputs").size());
  } else {
    for (size_t i = 0; i < m->inputs.size() && diff.empty(); ++i) {
      const std::string was = m->inputs[i].is_object() ? m->inputs[i].value("path", "") : "";
      const std::string is = now["inputs"][i].at("path").get<std::string>();
      if (was != is)
        diff = "input " + std::to_string(i + 1) + " was '" + was + "', now '" + is + "'";
    }
    const std::string was_table = m->table ? m->table->value("path", "") : "";
    const std::string is_table = o_table_path(now);
    if (diff.empty() && was_table != is_table)
      diff = "the table was '" + was_table + "', now '" + is_table + "'";
    else if (diff.empty() && table && m->table &&
             m->table->value("crc32", "") != crc32_hex(table->crc32))
      diff = "the table '" + is_table + "' is not the one it was made from (CRC-32 " +
             m->table->value("crc32", "") + " then, " + crc32_hex(table->crc32) + " now)";
    if (diff.empty()) diff = options_diff(*m->output_options, now.at("options"));
    // The references its samples were compared with (a manifest written before they were
    // recorded holds none: compared as none).
    const json was_refs = m->dedup_against.value_or(json::array());
    const json is_refs = now.value("dedup_against", json::array());
    if (diff.empty() && was_refs != is_refs) diff = dedup_against_diff(was_refs, is_refs);
  }
  if (!diff.empty()) throw refuse(diff);
}
}  // namespace

void check_complete_resumable(const fs::path& out, const json& now, const Table* table) {
  check_complete_manifest(
      out.string(), [&] { return read_manifest(out); }, now, table);
}

void check_complete_resumable(const std::string& where,
                              const std::optional<std::string>& manifest_text, const json& now,
                              const Table* table) {
  check_complete_manifest(
      where,
      [&]() -> std::optional<Manifest> {
        if (!manifest_text) return std::nullopt;
        const ManifestSeal seal = check_seal(*manifest_text);
        if (seal.state != ManifestSeal::State::Good)
          throw ParseError(seal.state == ManifestSeal::State::Wrong
                               ? "it was changed after it was written: its CRC-32 is " +
                                     seal.computed + ", its seal says " + seal.said
                               : std::string("it has no well-formed manifest_crc32 seal"));
        return parse_manifest(*manifest_text);
      },
      now, table);
}

}  // namespace tarmac
