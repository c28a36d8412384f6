// tarmac bench: how fast a dataset reads on this machine. Open time, random access to
// stored bytes, the image codec alone on one thread (the floor), and decoding into batches
// with 1..N threads, each as a fraction of threads x that floor.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "apps/commands.h"
#include "apps/errors.h"
#include "apps/flag_values.h"
#include "read/batch_loader.h"
#include "read/dataset.h"
#include "read/partition.h"
#include "transform/image_codec.h"

namespace tarmac::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Rate {
  int threads = 0;
  double samples_per_s = 0, mb_per_s = 0;
};

// Reads the stored bytes of `order` (every byte touched), the cost of a sample before decoding.
Rate bench_bytes(const Dataset& ds, const std::vector<int64_t>& order) {
  uint64_t bytes = 0, sink = 0;
  const auto t = Clock::now();
  for (int64_t i : order) {
    const auto b = ds.image(size_t(i));
    for (size_t k = 0; k < b.size(); k += 64) sink += b[k];
    bytes += b.size();
  }
  const double s = seconds_since(t);
  if (sink == 1) spdlog::debug("sink {}", sink);  // keeps the reads from being optimised away
  return {1, double(order.size()) / s, double(bytes) / s / 1e6};
}

// The codec alone: each image decoded once on this thread, no loader, no batch buffer. What
// a loader with n threads can at best reach is n times this.
Rate bench_codec(const Dataset& ds, const std::vector<int64_t>& order) {
  uint64_t bytes = 0;
  const auto t = Clock::now();
  for (int64_t i : order) {
    const auto b = ds.image(size_t(i));
    bytes += b.size();
    if (decode_image(b, uint64_t{1} << 36).empty()) throw DataError("image decoded empty");
  }
  const double s = seconds_since(t);
  return {1, double(order.size()) / s, double(bytes) / s / 1e6};
}

Rate bench_decode(const Dataset& ds, const std::vector<int64_t>& order, int threads, int w, int h) {
  BatchLoader loader(ds, {w, h, true, threads, {}});
  constexpr size_t kBatch = 64;
  std::vector<uint8_t> a(kBatch * size_t(w) * size_t(h) * 3), b(a.size());
  uint64_t bytes = 0;
  const auto t = Clock::now();
  for (size_t start = 0, k = 0; start < order.size(); start += kBatch, ++k) {
    std::vector<int64_t> idx(order.begin() + long(start),
                             order.begin() + long(std::min(order.size(), start + kBatch)));
    for (int64_t i : idx) bytes += ds.blob_ref(size_t(i)).size;
    auto& buf = k % 2 ? b : a;
    loader.load(idx, {{buf.data(), idx.size() * size_t(w) * size_t(h) * 3}, {}});
  }
  const double s = seconds_since(t);
  return {threads, double(order.size()) / s, double(bytes) / s / 1e6};
}

}  // namespace

Runner setup_bench(CLI::App& app, const GlobalFlags& g) {
  struct Opts {
    std::string dir;
    int threads = 0;
    size_t samples = 2000;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("dataset", o->dir, "Dataset directory written by tarmac convert")->required();
  app.add_option("--threads", o->threads,
                 "Most decoding threads to try (1, 2, 4, ... N); default: all cores")
      ->transform(integer_in(kThreadRange));
  app.add_option("--samples", o->samples, "Samples read per measurement (random order)")
      ->transform(integer_in({1, 1000000000}))
      ->capture_default_str();
  return [o, &g]() -> int {
    const auto t0 = Clock::now();
    const auto ds = std::make_unique<Dataset>(o->dir);
    const double open_ms = seconds_since(t0) * 1e3;
    const int max_threads =
        o->threads > 0 ? o->threads : int(std::max(1u, std::thread::hardware_concurrency()));
    nlohmann::ordered_json j{{"path", o->dir}, {"samples", ds->size()}, {"open_ms", open_ms}};
    if (ds->size() && ds->has_images()) {
      auto order = partition_indices(ds->size(), {0, 1, 1, 0, true, false});
      order.resize(std::min(order.size(), o->samples));
      const Rate raw = bench_bytes(*ds, order);
      j["bytes_only"] = {{"samples_per_s", raw.samples_per_s}, {"mb_per_s", raw.mb_per_s}};
      const auto [w, h] = ds->decoded_size(size_t(order[0]));
      j["decode_size"] = {w, h};
      const Rate floor = bench_codec(*ds, order);
      j["codec_1_thread"] = {{"samples_per_s", floor.samples_per_s}, {"mb_per_s", floor.mb_per_s}};
      nlohmann::ordered_json dec = nlohmann::ordered_json::array();
      for (int t = 1;; t = std::min(t * 2, max_threads)) {
        const Rate r = bench_decode(*ds, order, t, w, h);
        dec.push_back({{"threads", t},
                       {"samples_per_s", r.samples_per_s},
                       {"mb_per_s", r.mb_per_s},
                       {"of_floor", r.samples_per_s / (t * floor.samples_per_s)}});
        if (t == max_threads) break;
      }
      j["decoded"] = dec;
    }
    if (g.json) {
      print_json(j);
      return kOk;
    }
    std::printf("%s: %zu samples, opened in %.2f ms\n", o->dir.c_str(), ds->size(), open_ms);
    if (j.contains("bytes_only"))
      std::printf("  stored bytes, random order   %10.0f samples/s  %8.1f MB/s\n",
                  j["bytes_only"]["samples_per_s"].get<double>(),
                  j["bytes_only"]["mb_per_s"].get<double>());
    if (j.contains("codec_1_thread"))
      std::printf("  codec alone, 1 thread        %10.0f samples/s  %8.1f MB/s  (the floor)\n",
                  j["codec_1_thread"]["samples_per_s"].get<double>(),
                  j["codec_1_thread"]["mb_per_s"].get<double>());
    if (j.contains("decoded"))
      for (const auto& r : j["decoded"])
        std::printf(
            "  decoded %dx%d, %2d thread(s) %10.0f samples/s  %8.1f MB/s  %3.0f%% of %d x floor\n",
            j["decode_size"][0].get<int>(), j["decode_size"][1].get<int>(), r["threads"].get<int>(),
            r["samples_per_s"].get<double>(), r["mb_per_s"].get<double>(),
            100 * r["of_floor"].get<double>(), r["threads"].get<int>());
    return kOk;
  };
}

}  // namespace tarmac::cli
