#include "format/checkpoint.h"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"
#include "format/json_object.h"
#include "format/manifest.h"

namespace tarmac::format {
namespace {

using json = nlohmann::ordered_json;

// The keys, spelled here only.
constexpr const char* kVersionKey = "tarmac_checkpoint";
constexpr const char* kRunKey = "run";
constexpr const char* kEntriesKey = "entries";
constexpr const char* kReadKey = "read";
constexpr const char* kWriterKey = "writer";
constexpr const char* kLogsKey = "logs";
constexpr const char* kCountsKey = "counts";
constexpr const char* kDedupKey = "dedup";

// The five counts, in version 1's list order.
constexpr std::array<const char*, 5> kCountNames = {"skipped_samples", "ignored_members",
                                                    "duplicates", "no_instance_samples",
                                                    "duplicate_content_samples"};

std::array<uint64_t*, 5> count_fields(CheckpointCounts& c) {
  return {&c.skipped_samples, &c.ignored_members, &c.duplicates, &c.no_instance_samples,
          &c.duplicate_content_samples};
}

template <class T>
constexpr const char* json_kind() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  if constexpr (std::is_integral_v<T>) return "a non-negative integer in range";
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  return "a list of the right kind";
}

template <class T>
struct IsVector : std::false_type {};
template <class U>
struct IsVector<std::vector<U>> : std::true_type {};
template <class T>
struct IsPair : std::false_type {};
template <class A, class B>
struct IsPair<std::pair<A, B>> : std::true_type {};

// `v` as T, checked all the way down; nullopt when it is of another type. Integers through
// integer_of: nlohmann's get<> casts a float out of an integer's range as it is, which is
// undefined behaviour (fuzz_checkpoint found it in writer.shard_crcs).
template <class T>
std::optional<T> value_of(const json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return std::nullopt;
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    return integer_of<T>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return std::nullopt;
    return v.get<std::string>();
  } else if constexpr (IsVector<T>::value) {
    if (!v.is_array()) return std::nullopt;
    T out;
    out.reserve(v.size());
    for (const auto& e : v) {
      auto x = value_of<typename T::value_type>(e);
      if (!x) return std::nullopt;
      out.push_back(std::move(*x));
    }
    return out;
  } else {
    static_assert(IsPair<T>::value, "a checkpoint value is a bool, integer, string or list");
    if (!v.is_array() || v.size() != 2) return std::nullopt;
    auto first = value_of<typename T::first_type>(v[0]);
    auto second = value_of<typename T::second_type>(v[1]);
    if (!first || !second) return std::nullopt;
    return T{std::move(*first), std::move(*second)};
  }
}

// j.at(key) as T; a missing key or a value of another type is a ParseError naming `where.key`.
template <class T>
T get(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw ParseError("it has no '" + where + key + "'");
  std::optional<T> v = value_of<T>(*it);
  if (!v) throw ParseError("its '" + where + key + "' is not " + std::string(json_kind<T>()));
  return std::move(*v);
}

CheckpointCounts parse_counts(const json& c, int version) {
  CheckpointCounts out;
  auto fields = count_fields(out);
  if (version == 1) {  // a list: 3 counts (the earliest tarmac 0.1) or 5
    if (!c.is_array() || (c.size() != 3 && c.size() != 5))
      throw ParseError("its 'counts' is not a list of 3 or 5 counts");
    for (size_t k = 0; k < c.size(); ++k) {
      if (!c[k].is_number_unsigned()) throw ParseError("its 'counts' holds a non-count");
      *fields[k] = c[k].get<uint64_t>();
    }
    return out;
  }
  if (!c.is_object()) throw ParseError("its 'counts' is not an object");
  for (size_t k = 0; k < kCountNames.size(); ++k)
    *fields[k] = get<uint64_t>(c, kCountNames[k], "counts.");
  return out;
}

std::optional<CheckpointRead> parse_read(const json& cp) {
  const auto it = cp.find(kReadKey);
  if (it == cp.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw ParseError("its 'read' is not an object");
  CheckpointRead r;
  r.input = get<uint32_t>(*it, "input", "read.");
  r.bytes = get<uint64_t>(*it, "bytes", "read.");
  r.crc32 = get<uint32_t>(*it, "crc32", "read.");
  r.end = get<bool>(*it, "end", "read.");
  r.done = get<std::vector<std::pair<uint64_t, uint32_t>>>(*it, "done", "read.");
  return r;
}

CheckpointWriter parse_writer(const json& cp, int version) {
  const auto it = cp.find(kWriterKey);
  if (it == cp.end() || !it->is_object()) throw ParseError("it has no 'writer' object");
  const json& w = *it;
  CheckpointWriter out;
  out.samples = get<uint64_t>(w, "samples", "writer.");
  out.blob_bytes = get<uint64_t>(w, "blob_bytes", "writer.");
  out.key_bytes = get<uint64_t>(w, "key_bytes", "writer.");
  out.shards = get<std::vector<std::string>>(w, "shards", "writer.");
  out.shard_crcs = get<std::vector<uint32_t>>(w, "shard_crcs", "writer.");
  out.shard_sizes = get<std::vector<uint64_t>>(w, "shard_sizes", "writer.");
  if (!w.contains("shard_samples"))
    throw ParseError("it was written by an earlier tarmac (it lacks the samples per shard)");
  out.shard_samples = get<std::vector<uint64_t>>(w, "shard_samples", "writer.");
  if (out.shard_samples.size() != out.shards.size())
    throw ParseError("it is inconsistent (samples per shard)");
  if (const auto open = w.find("open_shard"); open != w.end() && !open->is_null())
    out.open_shard = CheckpointOpenShard{get<uint64_t>(*open, "size", "writer.open_shard."),
                                         get<uint32_t>(*open, "crc32", "writer.open_shard.")};
  // The closed shards have a CRC-32 and a size each, and only the last one may be open.
  const size_t closed = out.shards.size() - (out.open_shard ? 1 : 0);
  if (out.open_shard && out.shards.empty())
    throw ParseError("it records an open shard but no shard name");
  if (out.shard_crcs.size() != closed || out.shard_sizes.size() != closed)
    throw ParseError("its shard names, sizes and CRC-32s disagree (" +
                     std::to_string(out.shards.size()) + " names, " +
                     std::to_string(out.shard_sizes.size()) + " sizes, " +
                     std::to_string(out.shard_crcs.size()) + " CRC-32s" +
                     (out.open_shard ? ", one open" : "") + ")");
  out.spill = get<uint64_t>(w, "spill", "writer.");
  const auto schema = w.find("schema");
  if (schema == w.end()) throw ParseError("it has no 'writer.schema'");
  if (version == 1) {  // the schema's JSON as text inside the JSON
    if (!schema->is_string()) throw ParseError("its 'writer.schema' is not text");
    try {
      out.schema = json::parse(schema->get<std::string>());
    } catch (const json::exception&) {
      throw ParseError("its 'writer.schema' is not JSON text");
    }
  } else {
    out.schema = *schema;
  }
  if (!out.schema.is_object()) throw ParseError("its 'writer.schema' is not an object");
  return out;
}

json writer_json(const CheckpointWriter& w) {
  json j;
  j["samples"] = w.samples;
  j["blob_bytes"] = w.blob_bytes;
  j["key_bytes"] = w.key_bytes;
  j["shards"] = w.shards;
  j["shard_crcs"] = w.shard_crcs;
  j["shard_sizes"] = w.shard_sizes;
  j["shard_samples"] = w.shard_samples;
  j["open_shard"] = w.open_shard
                        ? json{{"size", w.open_shard->size}, {"crc32", w.open_shard->crc32}}
                        : json(nullptr);
  j["spill"] = w.spill;
  j["schema"] = w.schema;
  return j;
}

}  // namespace

Checkpoint parse_checkpoint(std::string_view text) {
  const ManifestSeal seal = check_seal(text, kCheckpointSealKey);
  if (seal.state == ManifestSeal::State::Malformed || seal.state == ManifestSeal::State::Wrong)
    throw ParseError("it was changed or damaged since the run wrote it (" +
                     (seal.state == ManifestSeal::State::Wrong
                          ? "its CRC-32 is " + seal.computed + ", its seal says " + seal.said
                          : std::string("its seal is malformed")) +
                     "); what it says cannot be trusted");
  json cp;
  try {
    cp = json::parse(text);
  } catch (const json::exception&) {
    throw ParseError("it is not JSON");
  }
  if (!cp.is_object()) throw ParseError("it is not a JSON object");
  Checkpoint c;
  c.version = get<int>(cp, kVersionKey, "");
  if (c.version < kCheckpointOldestSupportedVersion || c.version > kCheckpointCurrentVersion)
    throw ParseError("unknown version " + std::to_string(c.version) + " (this tarmac reads " +
                     std::to_string(kCheckpointOldestSupportedVersion) + " to " +
                     std::to_string(kCheckpointCurrentVersion) + ")");
  if (c.version >= 2 && seal.state == ManifestSeal::State::Missing)
    throw ParseError("it has no seal ('" + std::string(kCheckpointSealKey) + "')");
  const auto run = cp.find(kRunKey);
  if (run == cp.end() || !run->is_object()) throw ParseError("it has no 'run' object");
  c.run = *run;
  c.entries = get<uint64_t>(cp, kEntriesKey, "");
  c.read = parse_read(cp);
  c.writer = parse_writer(cp, c.version);
  const auto logs = get<std::vector<uint64_t>>(cp, kLogsKey, "");
  if (logs.size() != c.logs.size()) throw ParseError("its 'logs' is not 3 log lengths");
  std::copy(logs.begin(), logs.end(), c.logs.begin());
  const auto counts = cp.find(kCountsKey);
  if (counts == cp.end()) throw ParseError("it has no 'counts'");
  c.counts = parse_counts(*counts, c.version);
  if (cp.contains(kDedupKey)) c.dedup = get<uint64_t>(cp, kDedupKey, "");
  return c;
}

std::string checkpoint_text(const Checkpoint& c) {
  json j;
  j[kVersionKey] = kCheckpointCurrentVersion;
  j[kRunKey] = c.run;
  j[kEntriesKey] = c.entries;
  if (c.read) {
    j[kReadKey] = {{"input", c.read->input},
                   {"bytes", c.read->bytes},
                   {"crc32", c.read->crc32},
                   {"end", c.read->end},
                   {"done", c.read->done}};
  } else {
    j[kReadKey] = nullptr;
  }
  j[kWriterKey] = writer_json(c.writer);
  j[kLogsKey] = c.logs;
  json counts = json::object();
  CheckpointCounts copy = c.counts;
  const auto fields = count_fields(copy);
  for (size_t k = 0; k < kCountNames.size(); ++k) counts[kCountNames[k]] = *fields[k];
  j[kCountsKey] = std::move(counts);
  if (c.dedup) j[kDedupKey] = *c.dedup;
  j[std::string(kCheckpointSealKey)] = "00000000";
  return seal_text(j.dump(), kCheckpointSealKey);
}

}  // namespace tarmac::format
