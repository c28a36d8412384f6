#include "check/column_check.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "format/column_file.h"
#include "format/names.h"
#include "format/part_record.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"

namespace tarmac::check {
namespace fs = std::filesystem;

namespace {

std::string hex(uint32_t v) {
  return crc32_hex(v);
}

std::span<const uint8_t> bytes_of(std::span<const uint8_t> file, const TensorInfo& t) {
  return file.subspan(t.begin, t.end - t.begin);
}

// How many per-sample problems one column lists before it stops looking.
constexpr size_t kMostPerColumn = 10;

// The CRC-32 of `bytes` summed 64 MiB at a time, telling `advanced` of each piece.
uint32_t crc_telling(std::span<const uint8_t> bytes,
                     const std::function<void(uint64_t)>& advanced) {
  constexpr size_t kPiece = size_t{64} << 20;
  uint32_t crc = 0;
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const size_t k = std::min(kPiece, bytes.size() - at);
    crc = crc32_update(crc, bytes.data() + at, k);
    if (advanced) advanced(k);
  }
  return crc;
}

// The columns of `dir` that have parts (NAME.parts/) and no merged file, sorted by name.
std::vector<std::string> unmerged_columns(const fs::path& dir) {
  std::vector<std::string> out;
  const fs::path columns = dir / format::kColumnsDir;
  std::error_code ec;
  if (!fs::is_directory(columns, ec)) return out;
  for (fs::directory_iterator it(columns, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name;
    if (format::column_entry(it->path().filename().string(), &name) == format::ColumnEntry::Parts &&
        !fs::exists(dir / format::column_file(name), ec))
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One part record, read by the format's one parser of it (format/part_record.h), as `column
// merge` reads it: a record merge would refuse is a problem.
std::optional<format::PartRecord> read_share(const fs::path& record, std::string& why) {
  try {
    format::PartRecord r = format::read_part_record(record);
    if (r.end < r.begin) {
      why = "says its share ends at sample " + std::to_string(r.end) + ", before it begins (" +
            std::to_string(r.begin) + ")";
      return std::nullopt;
    }
    return r;
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

// "1, 3..5": rank numbers as runs.
std::string ranks_text(const std::vector<uint64_t>& ranks) {
  std::string out;
  for (size_t k = 0; k < ranks.size();) {
    size_t e = k;
    while (e + 1 < ranks.size() && ranks[e + 1] == ranks[e] + 1) ++e;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[k]) +
           (e > k ? ".." + std::to_string(ranks[e]) : "");
    k = e + 1;
  }
  return out;
}

// A column with parts and no merged file is not part of the dataset yet: the readers cannot
// read it, and a rank that never ran leaves its samples without output (issue #35 item 7).
void check_unmerged(const fs::path& dir, const std::string& name, const std::string& labels_crc32,
                    uint64_t n, std::vector<Problem>& problems) {
  const std::string where = format::column_parts_dir(name);
  std::vector<format::PartRecord> shares;
  std::error_code ec;
  for (fs::directory_iterator it(dir / where, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.rfind("part-", 0) != 0 || f.size() < 5 || f.compare(f.size() - 5, 5, ".json") != 0)
      continue;
    std::string why;
    if (auto s = read_share(it->path(), why))
      shares.push_back(*s);
    else
      problems.push_back({where + "/" + f, "", why});
  }
  const std::string fix = "`tarmac column merge " + dir.string() + " " + name + "`";
  uint64_t world = 0;
  for (const format::PartRecord& s : shares) world = std::max(world, s.world);
  uint64_t held = 0;
  std::vector<uint64_t> complete, missing;
  std::string unfinished;
  bool other_version = false;
  for (uint64_t r = 0; r < world; ++r) {
    const auto it = std::find_if(shares.begin(), shares.end(), [&](const format::PartRecord& s) {
      return s.world == world && s.rank == r;
    });
    if (it == shares.end()) {
      missing.push_back(r);
      continue;
    }
    if (it->labels_crc32 != labels_crc32) other_version = true;
    const uint64_t share = it->end - it->begin;
    held += it->complete ? share : std::min(it->done, share);
    if (it->complete)
      complete.push_back(r);
    else
      unfinished += "; rank " + std::to_string(r) + " unfinished at " +
                    std::to_string(std::min(it->done, share)) + " of " + std::to_string(share);
  }
  std::string what;
  if (world == 0)
    what = "column '" + name + "' has a parts folder and no part record: remove it with `tarmac " +
           "column rm " + dir.string() + " " + name + "`";
  else if (other_version)
    what = "column '" + name + "' is not merged, and its parts were computed from another " +
           "version of the dataset: remove it with `tarmac column rm " + dir.string() + " " + name +
           "` and derive it again";
  else if (missing.empty() && unfinished.empty())
    what = "column '" + name + "' is not merged: its " + std::to_string(world) +
           " ranks hold all " + std::to_string(n) + " samples; merge them with " + fix;
  else
    what = "column '" + name + "' holds " + std::to_string(held) + " of " + std::to_string(n) +
           " samples (" + (complete.empty() ? "no rank" : "rank " + ranks_text(complete)) + " of " +
           std::to_string(world) + " complete" +
           (missing.empty() ? "" : "; ranks " + ranks_text(missing) + " missing") + unfinished +
           "): run derive for the " + (missing.empty() ? "unfinished" : "missing") +
           " ranks, then " + fix;
  problems.push_back({where, "", what});
}

// The column files in `dir`/columns, sorted; others there (a merge's leftovers) in `partial`.
std::vector<std::pair<fs::path, std::string>> column_files(const fs::path& dir,
                                                           std::vector<std::string>* partial) {
  std::vector<std::pair<fs::path, std::string>> out;
  const fs::path columns = dir / format::kColumnsDir;
  std::error_code ec;
  if (!fs::is_directory(columns, ec)) return out;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(columns, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(it->path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    const std::string f = p.filename().string();
    std::string name;
    const format::ColumnEntry kind = format::column_entry(f, &name);
    if (kind == format::ColumnEntry::Partial && partial) partial->push_back(f);
    if (kind == format::ColumnEntry::Merged) out.emplace_back(p, name);
  }
  return out;
}

// Whether the column file at `path` is the one the manifest recorded: its size and the
// CRC-32s its metadata states (those are checked against its bytes by check_column).
bool matches_record(const fs::path& path, const format::ManifestColumn& r) {
  try {
    const MappedFile map(path.string());
    const format::ColumnLayout l = format::read_column_layout(parse_safetensors(map.bytes()));
    return map.bytes().size() == r.size && l.values_crc32 == r.values_crc32 &&
           l.offsets_crc32 == r.offsets_crc32 && l.shapes_crc32 == r.shapes_crc32;
  } catch (const std::exception&) {
    return true;  // unreadable: check_column says why
  }
}

void check_column(const fs::path& path, const std::string& name, const std::string& labels_crc32,
                  uint64_t n, std::vector<Problem>& problems, uint64_t& bytes_read,
                  const std::function<void(uint64_t)>& advanced) {
  const std::string file = std::string(format::kColumnsDir) + "/" + path.filename().string();
  auto problem = [&](const std::string& sample, const std::string& what) {
    problems.push_back({file, sample, what});
  };
  std::optional<MappedFile> map;
  format::ColumnLayout l;
  SafetensorsHeader h;
  try {
    map.emplace(path.string());
    h = parse_safetensors(map->bytes());
    l = format::read_column_layout(h);
  } catch (const std::exception& e) {
    problem("", e.what());
    return;
  }
  const auto bytes = map->bytes();
  bytes_read += bytes.size();
  if (l.name != name)
    problem("", "says it is column '" + l.name + "', its file name says '" + name + "'");
  if (l.labels_crc32 != labels_crc32 || l.num_samples != n) {
    problem("", "was computed from another version of the dataset (annotation file CRC-32 " +
                    l.labels_crc32 + ", " + std::to_string(l.num_samples) +
                    " samples; the dataset has " + labels_crc32 + ", " + std::to_string(n) +
                    "): remove it with `tarmac column rm` and derive it again");
    return;
  }
  std::vector<std::pair<const TensorInfo*, const std::string*>> sums = {
      {l.values, &l.values_crc32}, {l.offsets, &l.offsets_crc32}, {l.shapes, &l.shapes_crc32}};
  if (l.digest) sums.emplace_back(l.digest, &l.digest_crc32);
  bool intact = true;
  for (const auto& [t, said] : sums) {
    const std::string crc = hex(crc_telling(bytes_of(bytes, *t), advanced));
    if (crc != *said) {
      problem("", "CRC-32 of its '" + t->name + "' tensor is " + crc + ", its " + t->name +
                      "_crc32 says " + *said + ": the file was damaged after it was merged");
      intact = false;
    }
  }
  if (!intact) return;  // the per-sample checks below would only repeat it
  const auto* offsets = reinterpret_cast<const int64_t*>(bytes.data() + l.offsets->begin);
  const auto* shapes = reinterpret_cast<const int64_t*>(bytes.data() + l.shapes->begin);
  const int64_t esz = static_cast<int64_t>(dtype_size(l.dtype));
  const int64_t total = static_cast<int64_t>(l.values->end - l.values->begin) / esz;
  const auto d = static_cast<int64_t>(l.ndim);
  size_t listed = 0;
  if (offsets[0] != 0)
    problem("0", "its offsets start at " + std::to_string(offsets[0]) + ", not 0");
  for (uint64_t i = 0; i < n && listed < kMostPerColumn; ++i) {
    const auto si = static_cast<int64_t>(i);
    int64_t elements = 1;
    bool bad_shape = false;
    for (int64_t a = 0; a < d; ++a) {
      const int64_t dim = shapes[si * d + a];
      if (dim < 0 || (dim > 0 && elements > total / dim)) bad_shape = true;
      if (!bad_shape) elements *= dim;
    }
    const int64_t b = offsets[i], e = offsets[i + 1];
    std::string what;
    if (bad_shape)
      what = "has an impossible shape";
    else if (b < 0 || e < b || e > total)
      what = "has offsets " + std::to_string(b) + ".." + std::to_string(e) + " outside its " +
             std::to_string(total) + " values";
    else if (e - b != elements)
      what =
          "has " + std::to_string(e - b) + " values, its shape needs " + std::to_string(elements);
    else if (l.uniform_shape) {
      for (int64_t a = 0; a < d; ++a)
        if (shapes[si * d + a] != (*l.uniform_shape)[static_cast<size_t>(a)])
          what = "has a shape other than the column's one shape";
    }
    if (!what.empty()) {
      problem(std::to_string(i), "its output " + what);
      ++listed;
    }
  }
  if (listed == 0 && n > 0 && offsets[n] != total)
    problem("", "its offsets end at " + std::to_string(offsets[n]) + ", it holds " +
                    std::to_string(total) + " values");
}

}  // namespace

uint64_t check_columns(const fs::path& dir, const std::string& labels_crc32, uint64_t num_samples,
                       const RecordedColumns& recorded, std::vector<Problem>& problems,
                       uint64_t& bytes_read, const std::function<void(uint64_t)>& advanced) {
  std::vector<std::string> partial;
  const auto files = column_files(dir, &partial);
  for (const std::string& f : partial)
    problems.push_back({std::string(format::kColumnsDir) + "/" + f, "",
                        "an interrupted `tarmac column merge` left this file: remove it and "
                        "merge again"});
  std::set<std::string> present;
  for (const auto& [path, name] : files) {
    present.insert(name);
    const std::string file = std::string(format::kColumnsDir) + "/" + path.filename().string();
    if (recorded && !recorded->count(name))
      problems.push_back({file, "",
                          std::string("is not recorded in ") + format::kManifestFile +
                              " (`tarmac column merge` records the columns it writes): it was "
                              "copied in or merged by hand; merge it again from its parts, or "
                              "remove it with `tarmac column rm`"});
    else if (recorded && !matches_record(path, recorded->at(name)))
      problems.push_back(
          {file, "",
           "is not the file " + std::string(format::kManifestFile) + " records for column '" +
               name +
               "' (size or CRC-32s differ): it was replaced after it was merged; "
               "merge it again from its parts, or remove it with `tarmac column rm`"});
    check_column(path, name, labels_crc32, num_samples, problems, bytes_read, advanced);
  }
  for (const std::string& name : unmerged_columns(dir))
    if (!recorded || !recorded->count(name))  // a recorded one is reported missing below
      check_unmerged(dir, name, labels_crc32, num_samples, problems);
  if (recorded)
    for (const auto& [name, r] : *recorded)
      if (!present.count(name))
        problems.push_back({format::column_file(name), "",
                            "is missing: " + std::string(format::kManifestFile) +
                                " records column '" + name +
                                "' (merged by `tarmac column merge`); derive and merge it again, "
                                "or remove the record with `tarmac column rm " +
                                name + "`"});
  return files.size();
}

uint64_t column_files_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& [path, name] : column_files(dir, nullptr)) {
    const auto size = fs::file_size(path, ec);
    if (!ec) total += size;
  }
  return total;
}

}  // namespace tarmac::check
