#include "convert/dataset_writer.h"
#include "convert/stage_specs.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/layout.h"
#include "format/safetensors.h"
#include "support/temp_dir.h"

using namespace tarmac;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

fs::path temp_dir(const std::string& name) {
  return test::temp_dir("writer", name);
}

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Sample k: a 100 + k byte "image" of k's bytes, an I64 scalar `id` = k and a ragged F32 `pts`
// of k % 3 + 1 rows.
ProcessedSample sample(int k) {
  ProcessedSample s;
  s.key = "s/" + std::to_string(k);
  s.image.member_suffix = "jpg";
  s.image.bytes.assign(100 + static_cast<size_t>(k), static_cast<uint8_t>(k));
  s.image.width = 10 + k;
  s.image.height = 20 + k;
  s.image.crc32 = 0x1000u + static_cast<uint32_t>(k);
  SampleField id{"id", s.key + ".json", "json", {}};
  id.value.dtype = DType::I64;
  const int64_t v = k;
  id.value.data.resize(8);
  std::memcpy(id.value.data.data(), &v, 8);
  SampleField pts{"pts", s.key + ".json", "json", {}};
  pts.value.dtype = DType::F32;
  pts.value.shape = {k % 3 + 1, 2};
  for (int r = 0; r < (k % 3 + 1) * 2; ++r) {
    const float f = static_cast<float>(k) + 0.5f * static_cast<float>(r);
    const auto* b = reinterpret_cast<const uint8_t*>(&f);
    pts.value.data.insert(pts.value.data.end(), b, b + 4);
  }
  s.fields = {id, pts};
  return s;
}

ConvertOptions options() {
  ConvertOptions o;
  o.limits.shard_size = 1024;  // a few samples per shard
  return o;
}

}  // namespace

TEST_CASE("the dataset writer stores samples where the annotation file says") {
  const fs::path dir = temp_dir("basic");
  const ConvertOptions o = options();
  DatasetWriter w(writer_spec(o), dir, nullptr);
  for (int k = 0; k < 7; ++k) {
    ProcessedSample s = sample(k);
    w.add(s);
  }
  const fs::path labels = w.finish("tarmac test");
  CHECK(w.samples() == 7);
  REQUIRE(w.shard_names().size() > 1);  // 1 KiB shards: the samples spread over several

  const auto bytes = slurp(labels);
  const SafetensorsHeader h = parse_safetensors(bytes);
  const DatasetLayout l = read_layout(h);  // the format's own checks pass
  CHECK(l.num_samples == 7);
  REQUIRE(l.blobs.size() == 1);
  CHECK(l.blobs[0].encoding == format::StoredEncoding::Jpeg);
  auto at = [&](const TensorInfo* t, size_t i, auto v) {
    std::memcpy(&v, bytes.data() + t->begin + i * sizeof v, sizeof v);
    return v;
  };
  const auto& cols = l.blobs[0].columns;
  for (int k = 0; k < 7; ++k) {
    const auto i = static_cast<size_t>(k);
    // The blob is where the columns say, in the shard they name.
    const auto shard_index = static_cast<size_t>(at(cols[format::kBlobShard], i, int32_t{}));
    const auto shard = slurp(dir / l.shards.at(shard_index));
    const auto off = static_cast<size_t>(at(cols[format::kBlobOffset], i, int64_t{}));
    const auto size = static_cast<size_t>(at(cols[format::kBlobSize], i, int64_t{}));
    REQUIRE(size == 100 + i);
    REQUIRE(off + size <= shard.size());
    CHECK(std::all_of(shard.begin() + static_cast<long>(off),
                      shard.begin() + static_cast<long>(off + size),
                      [&](uint8_t b) { return b == k; }));
    CHECK(at(cols[format::kBlobCrc32], i, uint32_t{}) == 0x1000u + i);
    CHECK(at(cols[format::kBlobWidth], i, int32_t{}) == 10 + k);
    CHECK(at(l.fields.at(0).values, i, int64_t{}) == k);
    const auto b = at(l.fields.at(1).offsets, i, int64_t{}),
               e = at(l.fields.at(1).offsets, i + 1, int64_t{});
    CHECK(e - b == k % 3 + 1);
    CHECK(at(l.fields.at(1).values, static_cast<size_t>(b) * 2 + 1, float{}) ==
          static_cast<float>(k) + 0.5f);
  }
  CHECK(l.fields.at(1).spec.ragged);  // a JSON field whose first axis varies
}

TEST_CASE("a writer resumed from its checkpoint writes the same bytes as one never stopped") {
  const ConvertOptions o = options();
  const fs::path whole = temp_dir("whole"), cut = temp_dir("cut");
  {
    DatasetWriter w(writer_spec(o), whole, nullptr);
    for (int k = 0; k < 9; ++k) {
      ProcessedSample s = sample(k);
      w.add(s);
    }
    w.finish("tarmac test");
  }
  format::CheckpointWriter cp;
  {
    DatasetWriter w(writer_spec(o), cut, nullptr);
    for (int k = 0; k < 5; ++k) {
      ProcessedSample s = sample(k);
      w.add(s);
    }
    cp = w.checkpoint();
    for (int k = 5; k < 7; ++k) {  // written after the checkpoint, then the run is killed
      ProcessedSample s = sample(k);
      w.add(s);
    }
  }
  // What a resumed convert does before it makes the writer: shards begun after the checkpoint
  // go (check_resumable); the writer cuts the rest back.
  for (const auto& e : fs::directory_iterator(cut)) {
    const std::string n = e.path().filename().string();
    const auto& listed = cp.shards;
    if (format::is_shard_name(n) && std::find(listed.begin(), listed.end(), n) == listed.end())
      fs::remove(e.path());
  }
  {
    DatasetWriter w(writer_spec(o), cut, &cp);
    CHECK(w.samples() == 5);
    for (int k = 5; k < 9; ++k) {
      ProcessedSample s = sample(k);
      w.add(s);
    }
    w.finish("tarmac test");
  }
  for (const auto& e : fs::directory_iterator(whole)) {
    const std::string n = e.path().filename().string();
    if (n != format::kLabelsFile && !format::is_shard_name(n)) continue;
    INFO(n);
    CHECK(slurp(e.path()) == slurp(cut / n));
  }
}

TEST_CASE("a sample that contradicts the schema is refused and nothing of it is stored") {
  const fs::path dir = temp_dir("refused");
  const ConvertOptions o = options();
  DatasetWriter w(writer_spec(o), dir, nullptr);
  ProcessedSample a = sample(0);
  w.add(a);
  ProcessedSample b = sample(1);
  b.fields[0].source = "npy";  // `id` as an array from an .npy member: its rank contradicts
  b.fields[0].value.shape = {1};
  CHECK_THROWS_AS(w.add(b), SampleError);
  ProcessedSample c = sample(2);
  w.add(c);
  w.finish("tarmac test");
  CHECK(w.samples() == 2);
}
