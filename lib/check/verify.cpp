#include "check/verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "check/column_check.h"
#include "check/dataset_source.h"
#include "check/shard_check.h"
#include "common/crc32.h"
#include "common/error.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/shard_list.h"
#include "remote/inputs.h"
#include "remote/url.h"

namespace tarmac::check {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLabels = format::kLabelsFile;
constexpr const char* kManifest = format::kManifestFile;

std::string hex(uint32_t v) {
  return crc32_hex(v);
}

uint32_t crc_of(const uint8_t* p, uint64_t n) {
  return crc32_update(0, p, n);
}

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

VerifyReport verify_dataset(const VerifyOptions& o,
                            const std::function<void(const VerifyProgress&)>& progress) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  VerifyReport r;
  r.dir = o.dir;
  std::vector<Problem> problems;
  auto done = [&]() {
    r.problem_count = problems.size();
    if (problems.size() > kMaxProblems) problems.resize(kMaxProblems);
    r.problems = std::move(problems);
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return r;
  };
  std::optional<DatasetSource> src;
  try {
    src.emplace(o.dir);
  } catch (const remote::RemoteError& e) {
    if (e.http_status() != 404) throw;  // not the data: credentials, the server, the network
    problems.push_back({kManifest, "", e.what()});
    return done();
  }
  r.dir = src->name();
  const fs::path dir(src->dir());
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    problems.push_back({o.dir, "", "is not a directory"});
    return done();
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
    return done();
  }
  if (partial)
    problems.push_back(
        {format::kStagingDir, "", "an unfinished run left its staging directory here"});

  Annotation a;
  const bool usable = a.open(dir.string(), true, problems);
  const auto labels = a.file().bytes();
  r.bytes_checked += labels.size();
  format::Manifest m;
  uint64_t manifest_bytes = 0;
  const bool have_manifest = read_manifest(dir, problems, m, manifest_bytes);
  r.bytes_checked += manifest_bytes;
  auto mismatch = [&](const std::string& what, const std::string& manifest_says,
                      const std::string& found) {
    problems.push_back(
        {kManifest, "",
         what + ": the manifest says " + manifest_says + ", the dataset has " + found});
  };
  auto opt_text = [](std::optional<uint64_t> v) {
    return v ? std::to_string(*v) : std::string("nothing");
  };
  const std::string labels_crc = hex(crc_of(labels.data(), labels.size()));
  if (have_manifest) {
    const std::string said = m.labels_crc32.value_or("nothing");
    if (said != labels_crc) mismatch(std::string("CRC-32 of ") + kLabels, said, labels_crc);
    const auto size =
        m.annotation ? std::optional<uint64_t>(m.annotation->size) : std::optional<uint64_t>();
    if (size != labels.size())
      mismatch(std::string("size of ") + kLabels, opt_text(size), std::to_string(labels.size()));
  }
  if (!usable) return done();
  r.samples = a.size();
  r.shards = a.shards().size();
  if (have_manifest) {
    const auto count = [&](uint64_t format::ManifestCounts::*c) {
      return m.counts ? std::optional<uint64_t>((*m.counts).*c) : std::optional<uint64_t>();
    };
    const auto n = count(&format::ManifestCounts::samples);
    if (n != a.size()) mismatch("sample count", opt_text(n), std::to_string(a.size()));
    const auto s = count(&format::ManifestCounts::shards);
    if (s != a.shards().size())
      mismatch("shard count", opt_text(s), std::to_string(a.shards().size()));
  }

  // Extra shards: tar files in the directory that the annotation file does not list.
  const std::set<std::string> listed(a.shards().begin(), a.shards().end());
  std::vector<std::string> present;
  if (remote::is_s3(src->name())) {  // an http(s):// folder has no listing to read
    try {
      for (const auto& [url, size] : remote::list_objects(src->name(), src->config()))
        present.push_back(url.substr(src->name().size()));
    } catch (const remote::RemoteError&) {  // a key allowed to read but not to list
    }
  } else if (!src->remote()) {
    for (const auto& e : fs::directory_iterator(dir, ec))
      present.push_back(e.path().filename().string());
  }
  for (const std::string& name : present)
    if (name.ends_with(".tar") && name.find('/') == std::string::npos && !listed.count(name))
      problems.push_back(
          {name, "", "is a shard file that the annotation file does not list (an extra shard)"});

  // Blobs by shard, sorted by offset.
  const size_t kinds = a.blob_kinds().size();
  std::vector<std::vector<BlobEntry>> per_shard(a.shards().size());
  uint64_t blob_bytes = 0;
  for (uint64_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < kinds; ++k) {
      const BlobRef b = a.blob(k, i);
      blob_bytes += static_cast<uint64_t>(std::max<int64_t>(b.size, 0));
      if (b.shard >= 0 && static_cast<size_t>(b.shard) < per_shard.size())
        per_shard[static_cast<size_t>(b.shard)].push_back(i * kinds + k);
    }
  std::vector<uint64_t> samples(per_shard.size(), 0);  // whose image each shard holds
  for (size_t s = 0; s < per_shard.size(); ++s)
    for (BlobEntry e : per_shard[s])
      if (e % kinds == 0) ++samples[s];  // the image: one per sample
  const bool sampled = o.sample > 0 && o.sample < a.size();
  if (sampled) {
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
  if (have_manifest) {  // of all samples, from the annotation file: sampled or not
    const auto ib =
        m.counts ? std::optional<uint64_t>(m.counts->image_bytes) : std::optional<uint64_t>();
    if (ib != blob_bytes)
      mismatch("bytes of stored blobs", opt_text(ib), std::to_string(blob_bytes));
  }

  // Shards in parallel; the calling thread reports progress.
  std::vector<uint64_t> shard_sizes(a.shards().size(), 0);  // as the manifest or the disk says
  for (size_t s = 0; s < shard_sizes.size(); ++s)
    if (!src->remote())
      shard_sizes[s] = fs::file_size(dir / a.shards()[s], ec), ec.clear();
    else if (have_manifest && m.shards && s < m.shards->size())
      shard_sizes[s] = (*m.shards)[s].size;
  VerifyProgress p;
  if (sampled)
    for (const auto& v : per_shard)
      for (BlobEntry e : v)
        p.bytes_total += 512 + std::max<int64_t>(0, a.blob(e % kinds, e / kinds).size);
  else
    for (uint64_t size : shard_sizes) p.bytes_total += size;
  p.bytes_total += column_files_bytes(dir);  // checked after the shards
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<size_t> next{0}, finished{0};
  std::vector<ShardCheck> results(a.shards().size());
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(o.threads > 0 ? static_cast<size_t>(o.threads) : hw,
                                          std::max<size_t>(1, results.size()));
  std::mutex mu;
  std::condition_variable all_done;
  std::exception_ptr failure;  // what stops the check itself (guarded by mu)
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      try {
        for (size_t s; (s = next.fetch_add(1)) < results.size();) {
          throw_if_stopped(o.stop);
          // A remote shard is downloaded whole, checked as a local one, and removed.
          const std::string& name = a.shards()[s];
          if (sampled) {
            results[s] = check_sampled(*src, a, static_cast<uint32_t>(s), per_shard[s], o.decode,
                                       shard_sizes[s], bytes_done, o.stop);
          } else {
            try {
              src->download(name);
              results[s] = check_shard(a, static_cast<uint32_t>(s), per_shard[s], o.decode,
                                       bytes_done, o.stop);
            } catch (const remote::RemoteError& e) {
              results[s].problems.push_back({name, "",
                                             std::string("shard cannot be read: ") + e.what() +
                                                 " (" + std::to_string(per_shard[s].size()) +
                                                 " blob(s) stored in it are lost)"});
            }
            src->discard(name);
          }
          std::lock_guard lk(mu);
          if (finished.fetch_add(1) + 1 == results.size()) all_done.notify_all();
        }
      } catch (...) {
        std::lock_guard lk(mu);
        if (!failure) failure = std::current_exception();
        next.store(results.size());
        all_done.notify_all();
      }
    });
  {
    std::unique_lock lk(mu);
    while (!all_done.wait_for(lk, std::chrono::milliseconds(250),
                              [&] { return finished.load() == results.size() || failure; }))
      if (progress) {
        p.bytes_done = bytes_done.load();
        p.seconds = std::chrono::duration<double>(clock::now() - t0).count();
        progress(p);
      }
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  throw_if_stopped(o.stop);
  r.bytes_checked += bytes_done.load();

  const std::vector<format::ManifestShard>* mshards =
      have_manifest && m.shards ? &*m.shards : nullptr;
  if (have_manifest && (!mshards || mshards->size() != results.size()))
    mismatch("list of shards", mshards ? std::to_string(mshards->size()) + " shard(s)" : "nothing",
             std::to_string(results.size()) + " shard(s)");
  for (size_t s = 0; s < results.size(); ++s) {
    const ShardCheck& c = results[s];
    for (auto& pr : results[s].problems) problems.push_back(std::move(pr));
    if (!mshards || s >= mshards->size() || !c.walked) continue;
    const format::ManifestShard& e = (*mshards)[s];
    const std::string& name = a.shards()[s];
    if (e.name != name) {
      mismatch("name of shard " + std::to_string(s), e.name, name);
      continue;
    }
    if (e.size != c.size)
      mismatch("size of " + name, std::to_string(e.size), std::to_string(c.size));
    const std::string crc = e.crc32.empty() ? "nothing" : e.crc32;
    if (crc != hex(c.crc32)) mismatch("CRC-32 of " + name, crc, hex(c.crc32));
  }
  {
    std::vector<uint64_t> sizes(results.size(), 0);
    for (size_t s = 0; s < results.size(); ++s) sizes[s] = results[s].size;
    check_shard_list(dir, a, have_manifest ? m.shard_list : std::nullopt, samples, sizes, problems,
                     r.bytes_checked);
  }
  uint64_t column_done = 0;
  auto last = clock::now();
  RecordedColumns recorded;
  if (have_manifest && m.columns) {
    recorded.emplace();
    for (const auto& [name, c] : *m.columns) recorded->emplace(name, c);
  }
  r.columns = check_columns(dir, labels_crc, a.size(), recorded, problems, r.bytes_checked,
                            [&](uint64_t k) {
                              column_done += k;
                              if (!progress || clock::now() - last < std::chrono::milliseconds(250))
                                return;
                              last = clock::now();
                              p.bytes_done = bytes_done.load() + column_done;
                              p.seconds = std::chrono::duration<double>(last - t0).count();
                              progress(p);
                            });
  if (progress) {
    p.bytes_done = std::max(p.bytes_total, bytes_done.load() + column_done);  // all checked
    p.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    p.final = true;
    progress(p);
  }
  return done();
}

}  // namespace tarmac::check
