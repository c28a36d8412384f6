#include "format/manifest.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/crc32.h"
#include "common/error.h"
#include "format/json_object.h"
#include "format/names.h"

namespace tarmac::format {
namespace {

using json = nlohmann::ordered_json;

// Every entry with its member: the one list the writer and the reader both walk.
template <typename Counts, typename F>
void for_each_count(Counts& c, F&& f) {
  f("samples", c.samples);
  f("skipped_samples", c.skipped_samples);
  f("skipped_members", c.skipped_members);
  f("ignored_members", c.ignored_members);
  f("duplicates", c.duplicates);
  f("no_instance_samples", c.no_instance_samples);
  f("duplicate_content_samples", c.duplicate_content_samples);
  f("unused_images", c.unused_images);
  f("input_errors", c.input_errors);
  f("shards", c.shards);
  f("image_bytes", c.image_bytes);
}

constexpr std::string_view kSealKey = "manifest_crc32";

ParseError wrong(const std::string& key, const char* what) {
  return ParseError("manifest: \"" + key + "\" is not " + what);
}

// The typed readers: `key` names the value in errors, as a path ("counts.samples").
const json& object_at(const json& j, const std::string& key) {
  if (!j.is_object()) throw wrong(key, "an object");
  return j;
}
const json& array_at(const json& j, const std::string& key) {
  if (!j.is_array()) throw wrong(key, "a list");
  return j;
}
std::string text_at(const json& j, const std::string& key) {
  if (!j.is_string()) throw wrong(key, "a string");
  return j.get<std::string>();
}
uint64_t count_at(const json& j, const std::string& key) {
  if (!j.is_number_unsigned()) throw wrong(key, "a number of 0 or more");
  return j.get<uint64_t>();
}
// A member of object `j` (named `key`), or null when absent.
const json* member(const json& j, const char* name) {
  const auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}
const json& required(const json& j, const std::string& key, const char* name) {
  const json* v = member(j, name);
  if (!v) throw ParseError("manifest: \"" + key + "\" has no \"" + name + "\"");
  return *v;
}
// An array whose entries are all objects (the provenance lists).
json objects_at(json j, const std::string& key) {
  array_at(j, key);
  for (const auto& e : j)
    if (!e.is_object()) throw ParseError("manifest: an entry of \"" + key + "\" is not an object");
  return j;
}

ManifestShard shard_of(const json& e) {
  object_at(e, "shards");
  ManifestShard s;
  s.name = text_at(required(e, "shards", "name"), "shards.name");
  if (!is_shard_name(s.name))
    throw ParseError("manifest: lists '" + s.name + "' as a shard, which is no shard's name");
  if (const json* v = member(e, "size")) s.size = count_at(*v, "shards.size");
  if (const json* v = member(e, "crc32")) s.crc32 = text_at(*v, "shards.crc32");
  return s;
}

ManifestColumn column_of(const std::string& name, const json& r) {
  const std::string key = std::string(kManifestColumns) + "." + name;
  object_at(r, key);
  ManifestColumn c;
  c.size = count_at(required(r, key, "size"), key + ".size");
  c.values_crc32 = text_at(required(r, key, "values_crc32"), key + ".values_crc32");
  c.offsets_crc32 = text_at(required(r, key, "offsets_crc32"), key + ".offsets_crc32");
  c.shapes_crc32 = text_at(required(r, key, "shapes_crc32"), key + ".shapes_crc32");
  return c;
}

uint64_t entries_of(const std::vector<ProvenanceEntry>& list, ProvenanceEntry::Kind kind) {
  return static_cast<uint64_t>(std::count_if(
      list.begin(), list.end(), [&](const ProvenanceEntry& e) { return e.kind == kind; }));
}

std::vector<ProvenanceEntry> provenance_at(const json& j, const std::string& key) {
  array_at(j, key);
  std::vector<ProvenanceEntry> list;
  list.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i)
    list.push_back(
        parse_provenance_entry(j[i], "entry " + std::to_string(i) + " of \"" + key + "\""));
  return list;
}

json provenance_json(const std::vector<ProvenanceEntry>& list) {
  json j = json::array();
  for (const ProvenanceEntry& e : list) j.push_back(to_json(e));
  return j;
}

}  // namespace

json counts_json(const ManifestCounts& c) {
  json j = json::object();
  for_each_count(c, [&](const char* name, uint64_t v) { j[name] = v; });
  return j;
}

json part_json(const ManifestPart& p) {
  return {{"index", p.index}, {"count", p.count}, {"split", p.split}, {"all_inputs", p.all_inputs}};
}

const ManifestColumn* Manifest::column(const std::string& name) const {
  if (!columns) return nullptr;
  for (const auto& c : *columns)
    if (c.first == name) return &c.second;
  return nullptr;
}

void Manifest::set_column(const std::string& name, const std::optional<ManifestColumn>& record) {
  if (!columns) columns.emplace();
  const auto it = std::find_if(columns->begin(), columns->end(),
                               [&](const auto& c) { return c.first == name; });
  if (!record) {
    if (it != columns->end()) columns->erase(it);
  } else if (it != columns->end()) {
    it->second = *record;
  } else {
    columns->emplace_back(name, *record);
  }
}

ManifestCounts counts_from_lists(const Manifest& m, uint64_t samples, uint64_t image_bytes) {
  ManifestCounts c;
  c.samples = samples;
  c.image_bytes = image_bytes;
  using Kind = ProvenanceEntry::Kind;
  c.skipped_samples = entries_of(m.skipped, Kind::Sample);
  c.skipped_members = entries_of(m.skipped, Kind::Member);
  c.input_errors = entries_of(m.skipped, Kind::Archive);
  c.ignored_members = entries_of(m.ignored, Kind::Member);
  for (const ProvenanceEntry& e : m.ignored) {
    if (e.coded(ErrorCode::UnusedImage)) ++c.unused_images;
    if (e.kind != Kind::Sample) continue;
    if (e.coded(ErrorCode::DuplicateContent))
      ++c.duplicate_content_samples;
    else
      ++c.no_instance_samples;
  }
  c.duplicates = m.duplicates.size();
  c.shards = m.shards ? m.shards->size() : 0;
  return c;
}

std::vector<std::string> count_problems(const Manifest& m) {
  std::vector<std::string> out;
  if (!m.counts) return out;
  const ManifestCounts& said = *m.counts;
  const ManifestCounts lists = counts_from_lists(m, said.samples, said.image_bytes);
  const auto check = [&](const char* name, uint64_t count, uint64_t listed, const char* what) {
    if (count != listed)
      out.push_back("counts." + std::string(name) + " is " + std::to_string(count) + " but " +
                    what + " " + std::to_string(listed));
  };
  check("skipped_samples", said.skipped_samples, lists.skipped_samples,
        "\"skipped\" lists samples:");
  check("skipped_members", said.skipped_members, lists.skipped_members,
        "\"skipped\" lists members:");
  check("input_errors", said.input_errors, lists.input_errors, "\"skipped\" lists inputs:");
  check("ignored_members", said.ignored_members, lists.ignored_members,
        "\"ignored\" lists members:");
  check("no_instance_samples", said.no_instance_samples, lists.no_instance_samples,
        "\"ignored\" lists samples:");
  check("duplicate_content_samples", said.duplicate_content_samples,
        lists.duplicate_content_samples, "\"ignored\" lists duplicate_content samples:");
  check("unused_images", said.unused_images, lists.unused_images,
        "\"ignored\" lists unused images:");
  check("duplicates", said.duplicates, lists.duplicates, "\"duplicates\" lists");
  if (m.shards) check("shards", said.shards, lists.shards, "\"shards\" lists");
  return out;
}

json to_json(const Manifest& m) {
  json j = json::object();
  j["tool"] = {{"name", m.tool_name}, {"version", m.tool_version}};
  j["command_line"] = m.command_line;
  j["options"] = m.options;
  if (m.output_options) j["output_options"] = *m.output_options;
  if (m.merged_from) j["merged_from"] = *m.merged_from;
  j["inputs"] = m.inputs;
  if (m.table) j["table"] = *m.table;
  if (m.dedup_against) j["dedup_against"] = *m.dedup_against;
  if (m.resumed) j["resumed"] = {{"entries", m.resumed->entries}, {"samples", m.resumed->samples}};
  if (m.part) j["part"] = part_json(*m.part);
  if (m.counts) j["counts"] = counts_json(*m.counts);
  if (m.shards) {
    json shards = json::array();
    for (const auto& s : *m.shards)
      shards.push_back({{"name", s.name}, {"size", s.size}, {"crc32", s.crc32}});
    j["shards"] = std::move(shards);
  }
  if (m.annotation) j["annotation"] = {{"name", m.annotation->name}, {"size", m.annotation->size}};
  if (m.labels_crc32) j["labels_crc32"] = *m.labels_crc32;
  j["schema"] = m.schema;
  j["skipped"] = provenance_json(m.skipped);
  j["ignored"] = provenance_json(m.ignored);
  j["duplicates"] = provenance_json(m.duplicates);
  if (m.columns) {
    json cols = json::object();
    for (const auto& [name, c] : *m.columns)
      append_new_key(cols, name,
                     {{"size", c.size},
                      {"values_crc32", c.values_crc32},
                      {"offsets_crc32", c.offsets_crc32},
                      {"shapes_crc32", c.shapes_crc32}});
    j[kManifestColumns] = std::move(cols);
  }
  if (m.shard_list)
    j["shard_list"] = {{"name", m.shard_list->name}, {"crc32", m.shard_list->crc32}};
  for (auto it = m.unknown.begin(); it != m.unknown.end(); ++it)
    if (!j.contains(it.key()) && it.key() != kSealKey) j[it.key()] = it.value();
  return j;
}

std::string sealed_manifest_text(const Manifest& m) {
  const std::vector<std::string> problems = count_problems(m);
  if (!problems.empty())
    throw InternalError("manifest: its counts do not add up: " + problems.front());
  json j = to_json(m);
  j[std::string(kSealKey)] = "00000000";
  return seal_text(j.dump(2) + "\n", kSealKey);
}

Manifest parse_manifest(std::string_view text) {
  json j;
  try {
    j = parse_ordered(text);
  } catch (const nlohmann::json::exception& e) {
    throw ParseError(std::string("manifest: not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) throw ParseError("manifest: not a JSON object");
  Manifest m;
  m.unknown = json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    json& v = it.value();
    if (key == "tool") {
      object_at(v, key);
      if (const json* n = member(v, "name")) m.tool_name = text_at(*n, "tool.name");
      if (const json* n = member(v, "version")) m.tool_version = text_at(*n, "tool.version");
    } else if (key == "command_line") {
      m.command_line.clear();
      for (const auto& a : array_at(v, key)) m.command_line.push_back(text_at(a, key));
    } else if (key == "options") {
      object_at(v, key);
      m.options = std::move(v);
    } else if (key == "output_options") {
      object_at(v, key);
      m.output_options = std::move(v);
    } else if (key == "merged_from") {
      m.merged_from = objects_at(std::move(v), key);
    } else if (key == "inputs") {
      m.inputs = objects_at(std::move(v), key);
    } else if (key == "table") {
      object_at(v, key);
      m.table = std::move(v);
    } else if (key == "dedup_against") {
      m.dedup_against = objects_at(std::move(v), key);
    } else if (key == "resumed") {
      object_at(v, key);
      m.resumed = ManifestResumed{count_at(required(v, key, "entries"), "resumed.entries"),
                                  count_at(required(v, key, "samples"), "resumed.samples")};
    } else if (key == "part") {
      if (v.is_null()) continue;  // merged_from's entries write null; a run writes none
      object_at(v, key);
      ManifestPart p;
      p.index = count_at(required(v, key, "index"), "part.index");
      p.count = count_at(required(v, key, "count"), "part.count");
      p.split = text_at(required(v, key, "split"), "part.split");
      if (const json* n = member(v, "all_inputs")) p.all_inputs = count_at(*n, "part.all_inputs");
      m.part = p;
    } else if (key == "counts") {
      object_at(v, key);
      ManifestCounts c;  // an entry a manifest lacks (written before it existed) is 0
      for_each_count(c, [&](const char* name, uint64_t& n) {
        if (const json* e = member(v, name)) n = count_at(*e, "counts." + std::string(name));
      });
      m.counts = c;
    } else if (key == "shards") {
      m.shards.emplace();
      for (const auto& e : array_at(v, key)) m.shards->push_back(shard_of(e));
    } else if (key == "annotation") {
      object_at(v, key);
      ManifestAnnotation a;
      if (const json* n = member(v, "name")) a.name = text_at(*n, "annotation.name");
      a.size = count_at(required(v, key, "size"), "annotation.size");
      m.annotation = a;
    } else if (key == "labels_crc32") {
      m.labels_crc32 = text_at(v, key);
    } else if (key == "schema") {
      object_at(v, key);
      m.schema = std::move(v);
    } else if (key == "skipped") {
      m.skipped = provenance_at(v, key);
    } else if (key == "ignored") {
      m.ignored = provenance_at(v, key);
    } else if (key == "duplicates") {
      m.duplicates = provenance_at(v, key);
    } else if (key == kManifestColumns) {
      object_at(v, key);
      m.columns.emplace();
      for (auto c = v.begin(); c != v.end(); ++c)
        m.columns->emplace_back(c.key(), column_of(c.key(), c.value()));
    } else if (key == "shard_list") {
      object_at(v, key);
      m.shard_list = ManifestShardList{text_at(required(v, key, "name"), "shard_list.name"),
                                       text_at(required(v, key, "crc32"), "shard_list.crc32")};
    } else if (key != kSealKey) {
      append_new_key(m.unknown, key, std::move(v));
    }
  }
  return m;
}

std::optional<Manifest> read_manifest(const std::filesystem::path& dir) {
  std::ifstream in(dir / kManifestFile, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str());
}

bool holds_dataset(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::symlink_status(dir / kLabelsFile, ec).type() ==
             std::filesystem::file_type::regular &&
         std::filesystem::symlink_status(dir / kManifestFile, ec).type() ==
             std::filesystem::file_type::regular;
}

namespace {

// Where the 8 digits of the seal field `key` start in `text` (its last "KEY": "), or npos.
size_t seal_digits(std::string_view text, std::string_view key) {
  const std::string name = "\"" + std::string(key) + "\":";
  const size_t at = text.rfind(name);
  if (at == std::string_view::npos) return at;
  size_t from = at + name.size();
  while (from < text.size() && text[from] == ' ') ++from;
  if (from >= text.size() || text[from] != '"') return std::string_view::npos;
  return from + 1;
}

}  // namespace

ManifestSeal check_seal(std::string_view text) {
  return check_seal(text, kSealKey);
}

ManifestSeal check_seal(std::string_view text, std::string_view key) {
  // Found in the text, not by a parse: the seal's digits are checked in place, and a manifest
  // of a wide table's schema is not parsed twice.
  ManifestSeal seal;
  const size_t from = seal_digits(text, key);
  if (from == std::string_view::npos) return seal;
  const size_t end = text.find('"', from);
  seal.said = std::string(text.substr(from, end == std::string_view::npos ? 8 : end - from));
  if (end == std::string_view::npos || end - from != 8) {
    seal.state = ManifestSeal::State::Malformed;
    return seal;
  }
  std::string zeroed(text);
  zeroed.replace(from, 8, "00000000");
  seal.computed = crc32_hex(crc32_update(0, zeroed.data(), zeroed.size()));
  seal.state = seal.computed == seal.said ? ManifestSeal::State::Good : ManifestSeal::State::Wrong;
  return seal;
}

std::string seal_text(std::string text, std::string_view key) {
  const size_t at = seal_digits(text, key);
  if (at == std::string::npos || text.compare(at, 9, "00000000\"") != 0)
    throw InternalError("seal_text: no \"" + std::string(key) + "\": \"00000000\" to seal");
  text.replace(at, 8, crc32_hex(crc32_update(0, text.data(), text.size())));
  return text;
}

std::vector<std::string> manifest_shard_names(const Manifest& m) {
  std::vector<std::string> names;
  if (m.shards)
    for (const auto& s : *m.shards) names.push_back(s.name);
  return names;
}

DeclaredGeometry declared_geometry(const nlohmann::ordered_json& manifest) {
  DeclaredGeometry out;
  if (!manifest.is_object() || !manifest.contains("output_options")) return out;
  const auto& oo = manifest["output_options"];
  if (!oo.is_object()) return out;
  auto strings = [&](const char* flag, std::vector<std::string>& to) {
    if (oo.contains(flag) && oo[flag].is_array())
      for (const auto& s : oo[flag])
        if (s.is_string()) to.push_back(s.get<std::string>());
  };
  strings("--points", out.points);
  strings("--boxes", out.boxes);
  strings("--points3d", out.points3d);
  strings("--axis-angle", out.axis_angle);
  strings("--camera", out.cameras);
  strings("--polygons", out.polygons);
  strings("--masks", out.masks);
  const auto convention = oo.find("--box-convention");
  out.box_edges = convention != oo.end() && *convention == "edges";
  return out;
}

DeclaredGeometry declared_geometry(const std::filesystem::path& dir) {
  std::ifstream in(dir / kManifestFile);
  if (!in) return {};
  return declared_geometry(parse_ordered(in, false));
}

}  // namespace tarmac::format
