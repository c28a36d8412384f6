#include "format/part_record.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <tuple>

#include "common/error.h"
#include "format/column_file.h"

namespace tarmac::format {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const fs::path& path, const std::string& what) {
  throw ParseError(path.string() + ": " + what +
                   " (a part is written by `python -m tarmac.derive`; re-run that rank with "
                   "--restart, or remove the column's parts with `tarmac column rm`)");
}

const json& member(const json& j, const fs::path& path, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) bad(path, std::string("has no \"") + key + "\"");
  return *it;
}

uint64_t count(const json& j, const fs::path& path, const char* key) {
  const json& v = member(j, path, key);
  if (!v.is_number_unsigned()) bad(path, std::string("\"") + key + "\" is not a count");
  return v.get<uint64_t>();
}

std::string text(const json& j, const fs::path& path, const char* key) {
  const json& v = member(j, path, key);
  if (!v.is_string()) bad(path, std::string("\"") + key + "\" is not a string");
  return v.get<std::string>();
}

bool is_plain_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s.find('\0') == std::string::npos &&
         s != "." && s != "..";
}

}  // namespace

PartRecord parse_part_record(std::string_view record_text, const fs::path& path) {
  json j;
  try {
    j = json::parse(record_text);
  } catch (const json::exception& e) {
    bad(path, std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object()) bad(path, "is not a JSON object");
  PartRecord r;
  r.path = path;
  const std::string fmt = text(j, path, "format");
  if (fmt != kPartFormat)
    bad(path, "has format \"" + fmt + "\", this tarmac reads \"" + std::string(kPartFormat) + "\"");
  r.column = text(j, path, "column");
  r.rank = count(j, path, "rank");
  r.world = count(j, path, "world");
  r.begin = count(j, path, "begin");
  r.end = count(j, path, "end");
  const json& ds = member(j, path, "dataset");
  if (!ds.is_object()) bad(path, "\"dataset\" is not an object");
  r.labels_crc32 = text(ds, path, "labels_crc32");
  if (!is_crc32_hex(r.labels_crc32))
    bad(path, "\"dataset.labels_crc32\" is not 8 lowercase hex digits");
  r.num_samples = count(ds, path, "num_samples");
  r.fn = text(j, path, "fn");
  r.tool = text(j, path, "tool");
  // Written by derive since --reuse; absent in older records.
  if (j.contains("fn_version")) r.fn_version = text(j, path, "fn_version");
  if (j.contains("digest")) r.digest = text(j, path, "digest");
  if (j.contains("reused")) r.reused = count(j, path, "reused");
  const json& chunks = member(j, path, "chunks");
  if (!chunks.is_array()) bad(path, "\"chunks\" is not an array");
  for (const json& c : chunks) {
    if (!c.is_object()) bad(path, "a chunk entry is not an object");
    PartChunk pc{text(c, path, "file"), count(c, path, "samples"), count(c, path, "bytes"),
                 text(c, path, "crc32")};
    if (!is_plain_name(pc.file)) bad(path, "chunk file \"" + pc.file + "\" is not a plain name");
    if (!is_crc32_hex(pc.crc32))
      bad(path, "chunk \"" + pc.file + "\" has a CRC-32 that is not 8 lowercase hex digits");
    r.chunks.push_back(std::move(pc));
  }
  r.done = count(j, path, "done");
  const json& complete = member(j, path, "complete");
  if (!complete.is_boolean()) bad(path, "\"complete\" is not true or false");
  r.complete = complete.get<bool>();
  if (r.world == 0 || r.rank >= r.world)
    bad(path, "says rank " + std::to_string(r.rank) + " of world " + std::to_string(r.world));
  if (path.filename() != part_record_name(r.rank, r.world))
    bad(path, "says rank " + std::to_string(r.rank) + " of " + std::to_string(r.world) +
                  ", which is not what its name says");
  return r;
}

PartRecord read_part_record(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw FatalError("cannot read '" + path.string() + "': " + ec.message());
  if (size > kMaxPartRecordBytes) bad(path, "is " + std::to_string(size) + " bytes, too large");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) throw FatalError("cannot read '" + path.string() + "'");
  return parse_part_record(ss.str(), path);
}

std::vector<PartRecord> read_part_records(const fs::path& parts_dir) {
  std::vector<PartRecord> out;
  std::error_code ec;
  for (fs::directory_iterator it(parts_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("part-", 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".json") == 0 && name.find("-of-") != std::string::npos)
      out.push_back(read_part_record(it->path()));
  }
  if (ec) throw FatalError("cannot list '" + parts_dir.string() + "': " + ec.message());
  std::sort(out.begin(), out.end(), [](const PartRecord& a, const PartRecord& b) {
    return std::tie(a.world, a.rank) < std::tie(b.world, b.rank);
  });
  return out;
}

}  // namespace tarmac::format
