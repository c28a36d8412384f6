// verify: the plan (verify_plan.cpp), the shards' checks on parallel_for, and the reconciling
// of what they found with the manifest and the shard list (verify_internal.h).
#include "check/verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "check/column_check.h"
#include "check/verify_internal.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/parallel_for.h"
#include "format/names.h"
#include "format/shard_list.h"
#include "remote/remote_config.h"

namespace tarmac::check {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kManifest = format::kManifestFile;

std::string hex(uint32_t v) {
  return crc32_hex(v);
}

// Checks the shard list (format.md 7) against the dataset: it must exist when the manifest
// records one (with its CRC-32) or the dataset has shards and it is there; every shard in
// order, each `nsamples` the number of samples whose image the shard holds, each `filesize`
// the shard's size.
void check_shard_list(const fs::path& dir, const Annotation& a,
                      const std::optional<format::ManifestShardList>& recorded,
                      const std::vector<uint64_t>& samples, const std::vector<uint64_t>& sizes,
                      std::vector<Problem>& problems, uint64_t& bytes) {
  const char* file = format::kShardListFile;
  std::error_code ec;
  if (!fs::exists(dir / file, ec)) {
    if (recorded) problems.push_back({file, "", "is missing; the manifest records one"});
    return;
  }
  std::ifstream in(dir / file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  bytes += text.size();
  if (recorded) {
    const std::string crc = hex(crc32_update(0, text.data(), text.size()));
    const std::string& said = recorded->crc32;
    if (said != crc)
      problems.push_back({kManifest, "",
                          std::string("CRC-32 of ") + file + ": the manifest says " + said +
                              ", the dataset has " + crc});
  }
  format::ShardList list;
  try {
    list = format::parse_shard_list(text);
  } catch (const ParseError& e) {
    problems.push_back({file, "", std::string(e.what()) + " (WebDataset's wids cannot read it)"});
    return;
  }
  if (list.shards.size() != a.shards().size()) {
    problems.push_back({file, "",
                        "lists " + std::to_string(list.shards.size()) +
                            " shard(s), the annotation file " + std::to_string(a.shards().size())});
    return;
  }
  for (size_t s = 0; s < list.shards.size(); ++s) {
    const format::ShardListEntry& e = list.shards[s];
    const std::string& name = a.shards()[s];
    if (e.url != name) {
      problems.push_back({file, "",
                          "entry " + std::to_string(s) + " is '" + e.url + "', shard " +
                              std::to_string(s) + " is '" + name + "'"});
      continue;
    }
    if (e.nsamples != samples[s])
      problems.push_back({file, "",
                          "'" + name + "' has nsamples " + std::to_string(e.nsamples) +
                              ", the shard holds " + std::to_string(samples[s]) + " sample(s)"});
    if (e.filesize != 0 && e.filesize != sizes[s])
      problems.push_back({file, "",
                          "'" + name + "' has filesize " + std::to_string(e.filesize) +
                              ", the shard has " + std::to_string(sizes[s]) + " bytes"});
  }
}

// Checks the chosen blobs of shard `s` from their bytes alone (verify --sample): each read
// with its tar header, by pread or one Range GET.
ShardCheck check_sampled(const DatasetSource& src, const Annotation& a, uint32_t s,
                         const std::vector<BlobEntry>& entries, bool decode, uint64_t shard_size,
                         std::atomic<uint64_t>& progress, const StopRequest* stop) {
  ShardCheck r;
  r.size = shard_size;
  const size_t kinds = a.blob_kinds().size();
  for (BlobEntry e : entries) {
    throw_if_stopped(stop);
    const BlobRef b = a.blob(e % kinds, e / kinds);
    std::vector<uint8_t> bytes;
    if (b.offset >= 512 && b.size >= 0) {
      const uint64_t size = static_cast<uint64_t>(b.size) + 512;
      try {
        bytes = src.read_range(a.shards()[s], static_cast<uint64_t>(b.offset) - 512, size);
      } catch (const FatalError& ex) {
        r.problems.push_back({a.shards()[s], a.key(e / kinds),
                              a.blob_kinds()[e % kinds] + " cannot be read: " + ex.what()});
        continue;
      }
      progress.fetch_add(size, std::memory_order_relaxed);
    }
    for (Problem& p : check_blob(a, s, e, bytes, decode)) r.problems.push_back(std::move(p));
  }
  return r;
}

}  // namespace

std::vector<uint64_t> pick_samples(uint64_t n, uint64_t k, uint64_t seed) {
  if (k >= n) {
    std::vector<uint64_t> all(n);
    for (uint64_t i = 0; i < n; ++i) all[i] = i;
    return all;
  }
  // Floyd's algorithm: k distinct of [0, n), each set equally likely; mt19937_64 is specified
  // exactly by the standard, so a seed picks the same samples everywhere.
  std::mt19937_64 rng(seed);
  std::set<uint64_t> chosen;
  for (uint64_t j = n - k; j < n; ++j) {
    const uint64_t t = rng() % (j + 1);
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  return {chosen.begin(), chosen.end()};
}

namespace {

// The shards' checks, on parallel_for: a shard's problems stay apart from the other shards',
// in the shard's own result, so that the report lists them in shard order.
std::vector<ShardCheck> run_shards(const VerifyOptions& o, const detail::VerifyPlan& plan,
                                   const std::function<void(const VerifyProgress&)>& progress,
                                   VerifyProgress& p, Clock::time_point t0,
                                   std::atomic<uint64_t>& bytes_done) {
  const Annotation& a = plan.a;
  const DatasetSource& src = *plan.src;
  ParallelOptions po;
  po.threads = o.threads > 0 ? static_cast<unsigned>(o.threads) : 0;
  po.stop = o.stop;
  po.bytes = &bytes_done;
  if (progress)
    po.progress = [&](const ParallelProgress& pp) {
      if (pp.final) return;  // verify's own final report comes after the columns
      p.bytes_done = pp.bytes_done;
      p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      progress(p);
    };
  return parallel_for(a.shards().size(), po, [&](size_t s) {
    const auto shard = static_cast<uint32_t>(s);
    const std::vector<BlobEntry>& entries = plan.per_shard[s];
    if (plan.sampled)
      return check_sampled(src, a, shard, entries, o.decode, plan.shard_sizes[s], bytes_done,
                           o.stop);
    // A remote shard is downloaded whole, checked as a local one, and removed.
    const std::string& name = a.shards()[s];
    ShardCheck c;
    try {
      src.download(name);
      c = check_shard(a, shard, entries, o.decode, bytes_done, o.stop);
    } catch (const remote::RemoteError& e) {
      c.problems.push_back({name, "",
                            std::string("shard cannot be read: ") + e.what() + " (" +
                                std::to_string(entries.size()) +
                                " blob(s) stored in it are lost)"});
    }
    src.discard(name);
    return c;
  });
}

// What the shards hold against the manifest's list of shards, in shard order (each shard's
// own problems first), then the shard list.
void reconcile_shards(const detail::VerifyPlan& plan, std::vector<ShardCheck>& results,
                      std::vector<Problem>& problems, VerifyReport& r) {
  const Annotation& a = plan.a;
  const std::vector<format::ManifestShard>* mshards =
      plan.have_manifest && plan.m.shards ? &*plan.m.shards : nullptr;
  if (plan.have_manifest && (!mshards || mshards->size() != results.size()))
    detail::mismatch(problems, "list of shards",
                     mshards ? std::to_string(mshards->size()) + " shard(s)" : "nothing",
                     std::to_string(results.size()) + " shard(s)");
  for (size_t s = 0; s < results.size(); ++s) {
    ShardCheck& c = results[s];
    for (auto& pr : c.problems) problems.push_back(std::move(pr));
    if (!mshards || s >= mshards->size() || !c.walked) continue;
    const format::ManifestShard& e = (*mshards)[s];
    const std::string& name = a.shards()[s];
    if (e.name != name) {
      detail::mismatch(problems, "name of shard " + std::to_string(s), e.name, name);
      continue;
    }
    if (e.size != c.size)
      detail::mismatch(problems, "size of " + name, std::to_string(e.size), std::to_string(c.size));
    const std::string crc = e.crc32.empty() ? "nothing" : e.crc32;
    if (crc != hex(c.crc32)) detail::mismatch(problems, "CRC-32 of " + name, crc, hex(c.crc32));
  }
  std::vector<uint64_t> sizes(results.size(), 0);
  for (size_t s = 0; s < results.size(); ++s) sizes[s] = results[s].size;
  check_shard_list(plan.dir, a, plan.have_manifest ? plan.m.shard_list : std::nullopt, plan.samples,
                   sizes, problems, r.bytes_checked);
}

// The derived columns against the manifest's record of them, then the final progress report.
void reconcile_columns(const detail::VerifyPlan& plan,
                       const std::function<void(const VerifyProgress&)>& progress,
                       VerifyProgress& p, Clock::time_point t0, uint64_t shard_bytes,
                       std::vector<Problem>& problems, VerifyReport& r) {
  uint64_t column_done = 0;
  auto last = Clock::now();
  RecordedColumns recorded;
  if (plan.have_manifest && plan.m.columns) {
    recorded.emplace();
    for (const auto& [name, c] : *plan.m.columns) recorded->emplace(name, c);
  }
  r.columns = check_columns(plan.dir, plan.labels_crc, plan.a.size(), recorded, problems,
                            r.bytes_checked, [&](uint64_t k) {
                              column_done += k;
                              if (!progress || Clock::now() - last < std::chrono::milliseconds(250))
                                return;
                              last = Clock::now();
                              p.bytes_done = shard_bytes + column_done;
                              p.seconds = std::chrono::duration<double>(last - t0).count();
                              progress(p);
                            });
  if (progress) {
    p.bytes_done = std::max(p.bytes_total, shard_bytes + column_done);  // all checked
    p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    p.final = true;
    progress(p);
  }
}

}  // namespace

VerifyReport verify_dataset(const VerifyOptions& o,
                            const std::function<void(const VerifyProgress&)>& progress) {
  const auto t0 = Clock::now();
  VerifyReport r;
  r.dir = o.dir;
  std::vector<Problem> problems;
  auto done = [&]() {
    r.problem_count = problems.size();
    if (problems.size() > kMaxProblems) problems.resize(kMaxProblems);
    r.problems = std::move(problems);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  };
  detail::VerifyPlan plan;
  if (!detail::plan_verify(o, plan, r, problems)) return done();
  VerifyProgress p;
  p.bytes_total = plan.bytes_total;
  std::atomic<uint64_t> bytes_done{0};
  std::vector<ShardCheck> results = run_shards(o, plan, progress, p, t0, bytes_done);
  r.bytes_checked += bytes_done.load();
  reconcile_shards(plan, results, problems, r);
  reconcile_columns(plan, progress, p, t0, bytes_done.load(), problems, r);
  return done();
}

}  // namespace tarmac::check
