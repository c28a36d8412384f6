#include "convert/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/crc32.h"
#include "common/error.h"
#include "convert/table_input.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/shard_list.h"
#include "write/file_util.h"
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
