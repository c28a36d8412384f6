// Opening the parts of a merge and checking that they can be merged (merge_internal.h): each a
// valid dataset, numbering its classes as the others, no key in two parts, a --shard split
// whole and in order, converted with the same options. Nothing is written here.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "check/annotation.h"
#include "common/error.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/names.h"
#include "merge/merge_internal.h"
#include "write/manifest_file.h"

namespace tarmac::merge_detail {
namespace fs = std::filesystem;
using namespace format;

namespace {

// The part's fields whose NAME.valid is false in every sample.
std::set<std::string> all_null_fields(const Part& p) {
  std::set<std::string> names;
  for (const auto& f : p.a.fields()) {
    const FieldLayout* fl = p.a.layout().find_field(f.spec.name);
    if (!fl || !fl->valid || p.a.size() == 0) continue;
    const auto b = tensor_bytes(p, fl->valid);
    if (std::all_of(b.begin(), b.end(), [](uint8_t v) { return v == 0; }))
      names.insert(f.spec.name);
  }
  return names;
}

// Part `path`'s manifest; an empty one when it has none. Throws FatalError naming the part
// when its manifest is malformed (a wrong type, a shard named by a path).
format::Manifest read_part_manifest(const std::string& path) {
  try {
    return format::read_manifest(path).value_or(format::Manifest{});
  } catch (const ParseError& e) {
    throw FatalError("part '" + path + "': " + kManifestFile + ": " + e.what() +
                     " (run 'tarmac verify " + path + "')");
  }
}

// A key present twice: FatalError naming the key and both parts.
void check_unique_keys(const std::vector<const Part*>& parts) {
  struct Ref {
    uint64_t hash;
    uint32_t part;
    uint64_t index;
  };
  std::vector<Ref> refs;
  for (uint32_t p = 0; p < parts.size(); ++p)
    for (uint64_t i = 0; i < parts[p]->a.size(); ++i)
      refs.push_back({std::hash<std::string>{}(parts[p]->a.key(i)), p, i});
  std::sort(refs.begin(), refs.end(), [](const Ref& x, const Ref& y) {
    return std::tie(x.hash, x.part, x.index) < std::tie(y.hash, y.part, y.index);
  });
  for (size_t j = 1; j < refs.size(); ++j) {
    const Ref &x = refs[j - 1], &y = refs[j];
    if (x.hash != y.hash) continue;
    const std::string key = parts[x.part]->a.key(x.index);
    if (key == parts[y.part]->a.key(y.index))
      throw FatalError("key '" + key + "' is in part '" + parts[x.part]->path + "' (sample #" +
                       std::to_string(x.index) + ") and in part '" + parts[y.part]->path +
                       "' (sample #" + std::to_string(y.index) +
                       "): keys must be unique; were the same inputs converted twice?");
  }
}

// --classes-from-dirs: a part's `cls` ids index its class list, so parts whose lists differ
// (converted from other inputs) would give one id two meanings. Refused, naming the first
// difference.
void check_same_classes(const std::vector<std::unique_ptr<Part>>& parts) {
  const auto& first = parts[0]->a.layout().classes;
  for (const auto& p : parts) {
    const auto& c = p->a.layout().classes;
    if (c == first) continue;
    std::string diff;
    if (!c || !first) {
      diff = "one has class names (--classes-from-dirs), the other none";
    } else {
      size_t i = 0;
      while (i < c->size() && i < first->size() && (*c)[i] == (*first)[i]) ++i;
      diff = std::to_string(c->size()) + " classes against " + std::to_string(first->size()) +
             "; class " + std::to_string(i) + " is " +
             (i < c->size() ? "'" + (*c)[i] + "'" : "absent") + " against " +
             (i < first->size() ? "'" + (*first)[i] + "'" : "absent");
    }
    throw FatalError("part '" + p->path +
                     "' numbers its classes by other class folders than part '" + parts[0]->path +
                     "' (" + diff +
                     "), so one class id would name two classes; convert every part with the same "
                     "inputs (each part's pre-pass reads them all)");
  }
}

std::string part_name(const format::ManifestPart& p) {
  return std::to_string(p.index) + "/" + std::to_string(p.count);
}

}  // namespace

std::vector<std::unique_ptr<Part>> open_parts(const std::vector<std::string>& paths) {
  std::vector<std::unique_ptr<Part>> parts;
  for (const auto& path : paths) {
    auto p = std::make_unique<Part>();
    p->path = path;
    std::vector<check::Problem> problems;
    std::error_code ec;
    if (!fs::exists(fs::path(path) / kLabelsFile, ec))
      throw FatalError("part '" + path + "' is not a tarmac dataset: no " + kLabelsFile);
    // What is merged is verified first: a damaged annotation file would otherwise be copied
    // into the merge, whose new labels_crc32 would then vouch for it (docs/reliability.md).
    verified_labels_crc32(path, "part");
    if (!p->a.open(path, true, problems) || !problems.empty()) {
      const auto& pr = problems.front();
      throw FatalError("part '" + path + "' is not a valid dataset: " + pr.file + ": " +
                       (pr.sample.empty() ? "" : "sample '" + pr.sample + "': ") + pr.what +
                       " (run 'tarmac verify " + path + "')");
    }
    p->manifest = read_part_manifest(path);
    p->null_fields = all_null_fields(*p);
    parts.push_back(std::move(p));
  }
  return parts;
}

// The manifest options that must agree between parts for the merge to make sense: the typed
// options that shape the output (convert's output_options), or, for manifests written before
// they were recorded, the command line's options less those that do not.
json comparable_options(const format::Manifest& manifest) {
  if (manifest.output_options) return *manifest.output_options;
  json o = manifest.options;
  for (const char* k : {"inputs", "--output", "--shard", "--overwrite", "threads", "--threads"})
    o.erase(k);
  return o;
}

// The first option in which `b` differs from `a` ("--size [32,32] in one, [48,48] in the
// other"); empty when none does. --on-error may differ: a part resumed with `--on-error skip`
// past a bad sample (as the stop message advises) holds the samples it would have held, its
// skips listed.
std::string options_diff(const json& a, const json& b) {
  auto value = [](const json& o, const std::string& k) {
    return o.contains(k) ? o.at(k).dump() : std::string("not given");
  };
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  for (const auto& k : keys)
    if (k != "--on-error" && value(a, k) != value(b, k))
      return k + " " + value(a, k) + " in one, " + value(b, k) + " in the other";
  return "";
}

// The parts of one `convert --shard I/N` split (any part with N > 1): every part 0..N-1 of the
// same split exactly once, in order, or the merge is refused with nothing written: a merge
// short of a part would be a dataset missing its samples, exit 0. True when the parts are a
// split (false: whole datasets, joined as given).
bool check_split_complete(const std::vector<std::unique_ptr<Part>>& all) {
  const Part* first_split = nullptr;
  for (const auto& p : all)
    if (p->manifest.part && p->manifest.part->count > 1) {
      first_split = p.get();
      break;
    }
  if (!first_split) return false;
  const format::ManifestPart& want = *first_split->manifest.part;
  auto listing = [&] {
    std::string out;
    for (const auto& p : all)
      out += (out.empty() ? "'" : ", '") + p->path + "' " +
             (p->manifest.part ? part_name(*p->manifest.part) : std::string("(whole)"));
    return out;
  };
  std::vector<const Part*> at(want.count, nullptr);
  for (const auto& p : all) {
    const auto& mp = p->manifest.part;
    if (!mp || mp->count != want.count || mp->split != want.split ||
        mp->all_inputs != want.all_inputs)
      throw FatalError("part '" + p->path + "' is not a part of the --shard split that part '" +
                       first_split->path + "' (" + part_name(want) +
                       ") belongs to: parts of different conversions cannot be merged as one "
                       "(given: " +
                       listing() + ")");
    if (mp->index >= want.count)
      throw FatalError("part '" + p->path + "' records part " + part_name(*mp) +
                       ", which no split has; it is not a dataset convert --shard wrote");
    if (at[mp->index])
      throw FatalError("part " + part_name(*mp) + " is given twice: '" + at[mp->index]->path +
                       "' and '" + p->path + "'; give each part once");
    at[mp->index] = p.get();
  }
  std::string missing;
  for (uint64_t i = 0; i < want.count; ++i)
    if (!at[i])
      missing +=
          (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(want.count);
  if (!missing.empty())
    throw FatalError("the merge lacks part(s) " + missing + " of the --shard split of " +
                     std::to_string(want.count) + " (given: " + listing() +
                     "): without them the dataset would miss their samples. Convert the missing "
                     "part(s) (the same command with --shard I/" +
                     std::to_string(want.count) + ") and merge all " + std::to_string(want.count));
  for (uint64_t i = 0; i < want.count; ++i)
    if (at[i] != all[i].get()) {
      std::string order;
      for (const Part* p : at) order += " " + p->path;
      throw FatalError(
          "the parts of a --shard split are merged in their order, as one run "
          "orders its samples (given: " +
          listing() + "); give them as: tarmac merge" + order + " -o OUT");
    }
  return true;
}

// Opens every part and checks that they can be merged: valid datasets storing the same blobs,
// numbering classes alike, fields that reconcile, no key twice. Throws FatalError naming the
// part, with nothing written. The parts of a --shard split must all be there, in order, and
// converted alike; whole datasets converted with other options are joined with a warning.
PartSet open_mergeable_parts(const MergeOptions& o, std::vector<std::string>& warnings) {
  if (o.parts.empty()) throw UsageError("nothing to merge: give the part directories");
  PartSet set;
  set.all = open_parts(o.parts);
  const bool split = check_split_complete(set.all);
  for (const auto& p : set.all)
    if (p->a.size() > 0) set.sampled.push_back(p.get());
  if (set.sampled.empty()) set.sampled.push_back(set.all[0].get());
  const std::vector<const Part*>& parts = set.sampled;
  const auto& kinds = parts[0]->a.blob_kinds();
  for (const auto& p : parts)
    if (p->a.blob_kinds() != kinds)
      throw FatalError("part '" + p->path +
                       "' stores different blobs (images, dense maps) than part '" +
                       parts[0]->path + "'; the parts cannot be merged");
  check_same_classes(set.all);  // before the fields: a part without classes lacks `cls` too
  set.fields = reconcile(parts);
  check_unique_keys(parts);
  for (const auto& p : parts) {
    const std::string diff =
        options_diff(comparable_options(parts[0]->manifest), comparable_options(p->manifest));
    if (diff.empty()) continue;
    const std::string what = "part '" + p->path + "' was converted with other options than part '" +
                             parts[0]->path + "' (" + diff + ")";
    // Parts of one split make one dataset: one made with two --size is no such thing.
    if (split)
      throw FatalError(what +
                       ": the parts of one --shard split must be converted alike; "
                       "convert that part again with the others' options");
    warnings.push_back(what);
  }
  return set;
}

}  // namespace tarmac::merge_detail
