// Google Benchmark microbenchmarks of the reader's per-sample paths and of the kernels every
// byte passes through. Not a test (nothing here asserts a time): run by hand, figures go to
// docs/performance.md.
//
//   TARMAC_BENCH_DATASET=/tmp/rp/conv build/tests/bench/reader_perftest
//
// The dataset must have images and at least one fixed-shape numeric field;
// scripts/bench/reader_peers.py makes one of 20,000 samples (/tmp/rp/conv).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/crc32.h"
#include "read/dataset.h"
#include "read/partition.h"
#include "transform/image_codec.h"

namespace {

const tarmac::Dataset& dataset() {
  static const std::unique_ptr<tarmac::Dataset> ds = [] {
    const char* dir = std::getenv("TARMAC_BENCH_DATASET");
    if (dir == nullptr) {
      std::fprintf(stderr, "set TARMAC_BENCH_DATASET to a converted dataset (with images)\n");
      std::exit(2);
    }
    return std::make_unique<tarmac::Dataset>(dir);
  }();
  return *ds;
}

// A random order over the dataset, so that access is not sequential.
const std::vector<int64_t>& order() {
  static const std::vector<int64_t> o =
      tarmac::partition_indices(dataset().size(), {0, 1, 7, 0, true, false});
  return o;
}

// Runs `access(i)` once per benchmark iteration, i walking the random order.
template <class Access>
void over_random_samples(benchmark::State& state, Access access) {
  const auto& o = order();
  size_t k = 0;
  for (auto _ : state) {
    access(static_cast<size_t>(o[k]));
    if (++k == o.size()) k = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

std::string first_fixed_field() {
  for (const auto& f : dataset().fields())
    if (!f.ragged && f.kind == tarmac::FieldKind::Numeric) return f.name;
  return "__affine__";
}

void BM_Open(benchmark::State& state) {
  const std::string dir = dataset().path();
  for (auto _ : state) benchmark::DoNotOptimize(tarmac::Dataset(dir).size());
}
BENCHMARK(BM_Open)->Unit(benchmark::kMicrosecond);

// The "random access to image bytes": the checked span of sample i's stored bytes.
void BM_ImageSpan(benchmark::State& state) {
  const auto& ds = dataset();
  over_random_samples(state, [&](size_t i) { benchmark::DoNotOptimize(ds.image(i).data()); });
}
BENCHMARK(BM_ImageSpan);

// The same, reading one byte of every 64-byte cache line of the image (page cache warm): the
// cost of getting the bytes into the CPU, as a decoder will.
void BM_ImageTouch(benchmark::State& state) {
  const auto& ds = dataset();
  uint64_t bytes = 0;
  over_random_samples(state, [&](size_t i) {
    const auto b = ds.image(i);
    unsigned sum = 0;
    for (size_t k = 0; k < b.size(); k += 64) sum += b[k];
    benchmark::DoNotOptimize(sum);
    bytes += b.size();
  });
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_ImageTouch);

void BM_FixedValue(benchmark::State& state) {
  const auto& ds = dataset();
  const std::string name = first_fixed_field();
  over_random_samples(state,
                      [&](size_t i) { benchmark::DoNotOptimize(ds.value(name, i).bytes.data()); });
  state.SetLabel(name);
}
BENCHMARK(BM_FixedValue);

void BM_Key(benchmark::State& state) {
  const auto& ds = dataset();
  over_random_samples(state, [&](size_t i) { benchmark::DoNotOptimize(ds.key(i).data()); });
}
BENCHMARK(BM_Key);

void BM_Partition(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  uint64_t epoch = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(tarmac::partition_indices(n, {0, 1, 1, epoch++, true, false}));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Partition)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// The codec alone on the dataset's first image: the floor a loader thread is measured against.
void BM_DecodeImage(benchmark::State& state) {
  const auto b = dataset().image(0);
  for (auto _ : state) benchmark::DoNotOptimize(tarmac::decode_image(b, uint64_t{1} << 30).data);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeImage)->Unit(benchmark::kMicrosecond);

void BM_Crc32(benchmark::State& state) {
  std::vector<uint8_t> buf(static_cast<size_t>(state.range(0)));
  std::mt19937 rng(1);
  for (auto& x : buf) x = static_cast<uint8_t>(rng());
  for (auto _ : state) benchmark::DoNotOptimize(tarmac::crc32_of(buf));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Crc32)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
