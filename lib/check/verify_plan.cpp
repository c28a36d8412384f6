// verify's plan: the dataset's top-level files, its annotation file and manifest checked
// against each other, and the blobs each shard must hold (verify_internal.h).
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "check/column_check.h"
#include "check/verify_internal.h"
#include "common/crc32.h"
#include "common/error.h"
#include "format/names.h"
#include "remote/inputs.h"
#include "remote/url.h"

namespace tarmac::check::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLabels = format::kLabelsFile;
constexpr const char* kManifest = format::kManifestFile;

// Reads manifest.json, checks its own seal (format::check_seal) and parses it. False, with
// the problem, when there is none or it does not parse.
bool read_manifest(const fs::path& dir, std::vector<Problem>& problems, format::Manifest& m,
                   uint64_t& bytes) {
  std::ifstream in(dir / kManifest, std::ios::binary);
  if (!in) {
    problems.push_back({kManifest, "", "is missing or unreadable"});
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  bytes = text.size();
  try {
    m = format::parse_manifest(text);
  } catch (const ParseError& e) {
    problems.push_back({kManifest, "", e.what()});
    return false;
  }
  using State = format::ManifestSeal::State;
  const format::ManifestSeal seal = format::check_seal(text);
  if (seal.state == State::Missing)
    problems.push_back({kManifest, "", "has no \"manifest_crc32\" seal"});
  else if (seal.state == State::Malformed)
    problems.push_back({kManifest, "", "its \"manifest_crc32\" seal is malformed"});
  else if (seal.state == State::Wrong)
    problems.push_back({kManifest, "",
                        "CRC-32 of the file is " + seal.computed + " but its seal says " +
                            seal.said + ": " + kManifest + " was changed after it was written"});
  for (const std::string& p : format::count_problems(m)) problems.push_back({kManifest, "", p});
  return true;
}

// The dataset's folder, its annotation file and manifest, and the annotation file's CRC-32
// and size against the manifest. False when the annotation file cannot be used.
bool open_dataset(const VerifyOptions& o, VerifyPlan& plan, VerifyReport& r,
                  std::vector<Problem>& problems) {
  try {
    plan.src.emplace(o.dir);
  } catch (const remote::RemoteError& e) {
    if (e.http_status() != 404) throw;  // not the data: credentials, the server, the network
    problems.push_back({kManifest, "", e.what()});
    return false;
  }
  r.dir = plan.src->name();
  const fs::path dir = plan.dir = plan.src->dir();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    problems.push_back({o.dir, "", "is not a directory"});
    return false;
  }
  const bool partial = fs::exists(dir / format::kStagingDir, ec);
  r.found = fs::exists(dir / kLabels, ec) || fs::exists(dir / kManifest, ec);
  if (!fs::exists(dir / kLabels, ec)) {
    problems.push_back({kLabels, "",
                        r.found
                            ? std::string("is missing, though ") + kManifest +
                                  " is there: the dataset is damaged, or a copy of it is incomplete"
                            : std::string("is missing: '") + r.dir + "' is not a tarmac dataset" +
                                  (partial ? " (a conversion into it did not finish)" : "")});
    return false;
  }
  if (partial)
    problems.push_back(
        {format::kStagingDir, "", "an unfinished run left its staging directory here"});

  const bool usable = plan.a.open(dir.string(), true, problems);
  const auto labels = plan.a.file().bytes();
  r.bytes_checked += labels.size();
  uint64_t manifest_bytes = 0;
  plan.have_manifest = read_manifest(dir, problems, plan.m, manifest_bytes);
  r.bytes_checked += manifest_bytes;
  plan.labels_crc = crc32_hex(crc32_update(0, labels.data(), labels.size()));
  if (plan.have_manifest) {
    const format::Manifest& m = plan.m;
    const std::string said = m.labels_crc32.value_or("nothing");
    if (said != plan.labels_crc)
      mismatch(problems, std::string("CRC-32 of ") + kLabels, said, plan.labels_crc);
    const auto size =
        m.annotation ? std::optional<uint64_t>(m.annotation->size) : std::optional<uint64_t>();
    if (size != labels.size())
      mismatch(problems, std::string("size of ") + kLabels, opt_text(size),
               std::to_string(labels.size()));
  }
  return usable;
}

// The manifest's counts against the annotation file, and the shard files in the folder that
// the annotation file does not list.
void check_counts_and_extras(const VerifyPlan& plan, std::vector<Problem>& problems) {
  const Annotation& a = plan.a;
  if (plan.have_manifest) {
    const format::Manifest& m = plan.m;
    const auto count = [&](uint64_t format::ManifestCounts::*c) {
      return m.counts ? std::optional<uint64_t>((*m.counts).*c) : std::optional<uint64_t>();
    };
    const auto n = count(&format::ManifestCounts::samples);
    if (n != a.size()) mismatch(problems, "sample count", opt_text(n), std::to_string(a.size()));
    const auto s = count(&format::ManifestCounts::shards);
    if (s != a.shards().size())
      mismatch(problems, "shard count", opt_text(s), std::to_string(a.shards().size()));
  }
  const std::set<std::string> listed(a.shards().begin(), a.shards().end());
  const DatasetSource& src = *plan.src;
  std::vector<std::string> present;
  std::error_code ec;
  if (remote::is_s3(src.name())) {  // an http(s):// folder has no listing to read
    try {
      for (const auto& [url, size] : remote::list_objects(src.name(), src.config()))
        present.push_back(url.substr(src.name().size()));
    } catch (const remote::RemoteError&) {  // a key allowed to read but not to list
    }
  } else if (!src.remote()) {
    for (const auto& e : fs::directory_iterator(plan.dir, ec))
      present.push_back(e.path().filename().string());
  }
  for (const std::string& name : present)
    if (name.ends_with(".tar") && name.find('/') == std::string::npos && !listed.count(name))
      problems.push_back(
          {name, "", "is a shard file that the annotation file does not list (an extra shard)"});
}

// The blobs each shard must hold, sorted by offset (with --sample, the chosen samples' alone),
// the bytes of all stored blobs against the manifest, and each shard's size.
void plan_blobs(const VerifyOptions& o, VerifyPlan& plan, VerifyReport& r,
                std::vector<Problem>& problems) {
  const Annotation& a = plan.a;
  const size_t kinds = a.blob_kinds().size();
  auto& per_shard = plan.per_shard;
  per_shard.assign(a.shards().size(), {});
  uint64_t blob_bytes = 0;
  for (uint64_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < kinds; ++k) {
      const BlobRef b = a.blob(k, i);
      blob_bytes += static_cast<uint64_t>(std::max<int64_t>(b.size, 0));
      if (b.shard >= 0 && static_cast<size_t>(b.shard) < per_shard.size())
        per_shard[static_cast<size_t>(b.shard)].push_back(i * kinds + k);
    }
  plan.samples.assign(per_shard.size(), 0);
  for (size_t s = 0; s < per_shard.size(); ++s)
    for (BlobEntry e : per_shard[s])
      if (e % kinds == 0) ++plan.samples[s];  // the image: one per sample
  plan.sampled = o.sample > 0 && o.sample < a.size();
  if (plan.sampled) {
    const std::vector<uint64_t> chosen = pick_samples(a.size(), o.sample, o.seed);
    r.sampled = chosen.size();
    for (auto& v : per_shard)
      std::erase_if(v, [&](BlobEntry e) {
        return !std::binary_search(chosen.begin(), chosen.end(), e / kinds);
      });
  }
  for (auto& v : per_shard) {
    auto offset_of = [&](BlobEntry e) { return a.blob(e % kinds, e / kinds).offset; };
    if (!std::is_sorted(v.begin(), v.end(),
                        [&](BlobEntry x, BlobEntry y) { return offset_of(x) < offset_of(y); }))
      std::stable_sort(v.begin(), v.end(),
                       [&](BlobEntry x, BlobEntry y) { return offset_of(x) < offset_of(y); });
    r.blobs += v.size();
  }
  const format::Manifest& m = plan.m;
  if (plan.have_manifest) {  // of all samples, from the annotation file: sampled or not
    const auto ib =
        m.counts ? std::optional<uint64_t>(m.counts->image_bytes) : std::optional<uint64_t>();
    if (ib != blob_bytes)
      mismatch(problems, "bytes of stored blobs", opt_text(ib), std::to_string(blob_bytes));
  }
  plan.shard_sizes.assign(a.shards().size(), 0);  // as the manifest or the disk says
  std::error_code ec;
  for (size_t s = 0; s < plan.shard_sizes.size(); ++s)
    if (!plan.src->remote())
      plan.shard_sizes[s] = fs::file_size(plan.dir / a.shards()[s], ec), ec.clear();
    else if (plan.have_manifest && m.shards && s < m.shards->size())
      plan.shard_sizes[s] = (*m.shards)[s].size;
  if (plan.sampled)
    for (const auto& v : per_shard)
      for (BlobEntry e : v)
        plan.bytes_total += 512 + std::max<int64_t>(0, a.blob(e % kinds, e / kinds).size);
  else
    for (uint64_t size : plan.shard_sizes) plan.bytes_total += size;
  plan.bytes_total += column_files_bytes(plan.dir);  // checked after the shards
}

}  // namespace

void mismatch(std::vector<Problem>& problems, const std::string& what, const std::string& says,
              const std::string& found) {
  problems.push_back(
      {kManifest, "", what + ": the manifest says " + says + ", the dataset has " + found});
}

std::string opt_text(std::optional<uint64_t> v) {
  return v ? std::to_string(*v) : std::string("nothing");
}

bool plan_verify(const VerifyOptions& o, VerifyPlan& plan, VerifyReport& r,
                 std::vector<Problem>& problems) {
  if (!open_dataset(o, plan, r, problems)) return false;
  r.samples = plan.a.size();
  r.shards = plan.a.shards().size();
  check_counts_and_extras(plan, problems);
  plan_blobs(o, plan, r, problems);
  return true;
}

}  // namespace tarmac::check::detail
