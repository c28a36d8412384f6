#pragma once
// What the stages of a merge share (merge.cpp runs them: open_parts.cpp opens the parts and
// checks they can be merged, reconcile.cpp makes their schema one, place_shards.cpp links or
// copies their shards, merged_labels.cpp writes the joined annotation file, merged_manifest.cpp
// the manifest): an opened part, the set of them, the placed shards. Internal to lib/merge;
// its own namespace, so that a name like Part never meets another library's detail::Part.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "check/annotation.h"
#include "format/field_spec.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/names.h"
#include "merge/merge.h"
#include "write/safetensors_writer.h"

namespace tarmac::merge_detail {

using json = nlohmann::ordered_json;

struct Part {  // NOLINT(bugprone-exception-escape): moved only while parts are read
  std::string path;
  check::Annotation a;
  format::Manifest manifest;  // empty when the part has none
  /// Fields null in every sample of this part: they say nothing of the field's kind, dtype or
  /// shape (a part's all-null field gets some kind there), so the merge treats the part as
  /// lacking them, as one run over all parts' samples would have typed them.
  std::set<std::string> null_fields;
  /// How this part's values of a field are written when its kind there is not the merge's
  /// (set by reconcile): as JSON text, the way one run over all samples stores them.
  enum class Render : uint8_t { None, JsonString, EmptyList };
  mutable std::map<std::string, Render> render;
};

/// The parts, opened and checked against each other.
struct PartSet {
  std::vector<std::unique_ptr<Part>> all;  // in the order of the output
  // Those with samples (or the first part, when none has any): parts without samples (e.g.
  // --shard I/N with N above the sample count) have no schema to reconcile and no blobs; only
  // their manifests (inputs, skipped samples) are merged.
  std::vector<const Part*> sampled;
  std::vector<FieldSpec> fields;  // the merged schema
};

/// The merge's shards, placed in the staging directory.
struct PlacedShards {
  std::vector<std::string> names;
  std::vector<int32_t> base;      // per sampled part: the merged index of its first shard
  std::vector<uint64_t> samples;  // per shard: samples whose image is in it
  std::vector<format::ManifestShard> manifest;  // per shard: name, size, CRC-32
};

/// Part p's field `name`, or null when the part lacks it or holds only nulls in it.
inline const FieldLayout* field_of(const Part& p, const std::string& name) {
  if (p.null_fields.count(name)) return nullptr;
  return p.a.layout().find_field(name);
}

/// Tensor t's bytes in part p's memory map; valid while the part is open.
inline std::span<const uint8_t> tensor_bytes(const Part& p, const TensorInfo* t) {
  return p.a.file().bytes().subspan(t->begin, t->end - t->begin);
}

/// Whether part p's numeric field holds no element at all: every value an empty list (or
/// null). Like an all-null field it says nothing of the field's kind or dtype.
inline bool only_empty_lists(const Part& p, const FieldLayout& f) {
  // (all [] in a part is stored there as a fixed shape [0], or ragged with no rows)
  return f.spec.kind == FieldKind::Numeric && !f.spec.shape.empty() && f.values &&
         f.values->end == f.values->begin && p.a.size() > 0;
}

// open_parts.cpp

/// Opens and validates each part (verified labels CRC, deep checks, its manifest). Throws
/// FatalError naming the first part that is not a valid dataset.
std::vector<std::unique_ptr<Part>> open_parts(const std::vector<std::string>& paths);
/// The manifest options that must agree between parts (see open_parts.cpp).
json comparable_options(const format::Manifest& manifest);
/// The first option in which `b` differs from `a` ("--size [32,32] in one, [48,48] in the
/// other"); empty when none does (--on-error may differ).
std::string options_diff(const json& a, const json& b);
/// For the parts of a --shard split: true when they are one, all there, once, in order;
/// false for whole datasets. Throws FatalError otherwise, naming what is wrong.
bool check_split_complete(const std::vector<std::unique_ptr<Part>>& all);
/// Opens every part and checks that they can be merged; throws FatalError naming the part,
/// UsageError for no part. Warnings for whole datasets converted with other options.
PartSet open_mergeable_parts(const MergeOptions& o, std::vector<std::string>& warnings);

// reconcile.cpp

/// Whether a field whose informative parts hold `kinds` (and, when `empty_lists`, some part
/// only empty lists) is stored as JSON text, as one run over all samples stores it.
bool joined_as_json(const std::set<FieldKind>& kinds, bool empty_lists);
/// Joins part `part`'s spec `f` of field `name` into `o`, last shaped by part `shaped_by`:
/// dtypes promoted, a first axis that differs (or is ragged in one) made ragged. Throws
/// FatalError naming both parts for another kind or inner shape, or a fixed axis that differs
/// in a field not ragged by its source.
void join_field_spec(FieldSpec& o, const FieldSpec& f, const std::string& name,
                     const std::string& shaped_by, const std::string& part);
/// The output schema of the sampled parts; sets each part's `render`. Throws FatalError
/// naming the field and parts that cannot be merged.
std::vector<FieldSpec> reconcile(const std::vector<const Part*>& parts);

// place_shards.cpp

/// Places part shard `from` as `to` (a hard link, or a copy); true when linked. Throws
/// FatalError for a link, a file changed while placed, or one too short for `needed` bytes.
bool place_shard(const std::string& part, const std::filesystem::path& from,
                 const std::filesystem::path& to, bool copy, uint64_t needed);
/// The bytes each shard of part `p` must hold: the end of its last stored blob.
std::vector<uint64_t> shard_bytes_needed(const Part& p);
/// Places every part's shards in `staging`, renumbered in order; counts samples, shards and
/// blob bytes into `result`. Throws FatalError (Interrupted on a stop request).
PlacedShards place_shards(const MergeOptions& o, const PartSet& set,
                          const std::filesystem::path& staging, MergeResult& result);

// merged_labels.cpp

/// The tensors of the merged annotation file, filled from the parts' memory maps (valid while
/// the parts are open); part p's shard s becomes shard_base[p] + s.
std::vector<TensorSpec> merged_tensors(const std::vector<const Part*>& parts,
                                       const std::vector<FieldSpec>& fields,
                                       const std::vector<int32_t>& shard_base, uint64_t n);
/// The encoding of blob kind k over all parts; throws FatalError when they cannot be joined.
std::optional<format::StoredEncoding> merged_encoding(const std::vector<const Part*>& parts,
                                                      size_t k);
/// Writes the merged annotation file into `staging`; returns its metadata.
std::map<std::string, std::string> write_merged_labels(const MergeOptions& o, const PartSet& set,
                                                       const PlacedShards& placed,
                                                       const std::filesystem::path& staging,
                                                       MergeResult& result);

// merged_manifest.cpp

/// Writes the merged manifest (and shard list) into `staging`.
void write_merged_manifest(const MergeOptions& o, const PartSet& set, const PlacedShards& placed,
                           const std::map<std::string, std::string>& meta,
                           const std::filesystem::path& staging, MergeResult& result);

}  // namespace tarmac::merge_detail
