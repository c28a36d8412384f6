#include "convert/output_folder.h"

#include <algorithm>
#include <system_error>

#include "common/error.h"
#include "convert/checkpoint.h"
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
using namespace format;

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

void refuse_inputs_inside_output(const std::vector<std::string>& inputs,
                                 const std::string& output) {
  std::error_code ec;
  fs::path out = fs::weakly_canonical(output, ec);
  if (ec) return;
  if (out.filename().empty()) out = out.parent_path();  // "raw/" names the folder "raw"
  for (const auto& in : inputs) {
    if (in == "-" || is_pipe(in) || remote::is_remote(in)) continue;  // not a local path
    const fs::path path = fs::weakly_canonical(in, ec);
    if (ec) continue;
    const bool inside =
        std::mismatch(out.begin(), out.end(), path.begin(), path.end()).first == out.end();
    if (inside && path != out)
      throw FatalError("input '" + in + "' is inside the output directory '" + output +
                       "': writing the dataset there could replace it. Choose an output "
                       "directory that holds no input (e.g. -o converted/)");
  }
}

void refuse_inputs_inside_remote_output(const std::vector<std::string>& inputs,
                                        const std::string& destination) {
  const remote::S3Location out = remote::parse_s3(destination);
  std::string out_prefix = out.key;  // "" for the whole bucket
  if (!out_prefix.empty() && !out_prefix.ends_with('/')) out_prefix += '/';
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
PreparedOutput prepare_output(OutputPolicy o, const fs::path& out, const fs::path& staging) {
  PreparedOutput r;
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec))
      throw FatalError("output '" + out.string() + "' exists and is not a directory");
    const bool has_labels = fs::exists(out / kLabelsFile, ec);
    if (o.resume && fs::exists(staging / kCheckpointFile, ec) && (!has_labels || o.overwrite)) {
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
    if (o.resume && has_labels) {
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
    if (!o.resume && !o.overwrite && !has_labels)
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
      if (!o.overwrite)
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

}  // namespace tarmac
