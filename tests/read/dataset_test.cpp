#include "read/dataset.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "dataset_fixture.h"
#include "format/safetensors.h"
#include "read/derived_column.h"
#include "read/mapped_file.h"

using namespace tarmac;
using namespace tarmac::test;

namespace {

// The absolute byte range of tensor `name` in the annotation file at `path`.
TensorInfo locate(const std::string& labels_path, const std::string& name) {
  MappedFile f(labels_path);
  const SafetensorsHeader h = parse_safetensors(f.bytes());
  const TensorInfo* t = h.find(name);
  REQUIRE(t != nullptr);
  return *t;
}

// Overwrites element `i` of an 8- or 4-byte tensor of the copied dataset `dir`.
template <class T>
void poke(const std::string& dir, const std::string& tensor, size_t i, T value) {
  const std::string path = dir + "/labels.safetensors";
  const TensorInfo t = locate(path, tensor);
  auto bytes = read_all(path);
  std::memcpy(bytes.data() + t.begin + i * sizeof(T), &value, sizeof(T));
  write_all(path, bytes);
}

}  // namespace

TEST_CASE("a converted dataset opens and its values match what the generator wrote") {
  const Dataset ds(fixture_dataset());
  REQUIRE(ds.size() == kSamples);
  REQUIRE(ds.blob_kinds() == std::vector<std::string>{"__image__", "__depth__"});
  REQUIRE(ds.shard_names().size() == 4);
  REQUIRE(ds.fields().size() == 5);
  for (size_t i = 0; i < ds.size(); ++i) {
    const int k = static_cast<int>(i);
    char key[16];
    std::snprintf(key, sizeof key, "s/%04d", k);
    CHECK(ds.key(i) == key);
    CHECK(ds.value("id", i).as<int64_t>()[0] == k);
    CHECK(ds.value("id", i).shape.ndim == 0);
    const auto vec = ds.value("vec", i);
    REQUIRE(vec.shape.ndim == 1);
    CHECK(vec.shape[0] == 3);
    CHECK(vec.as<double>()[0] == 1.5 * k);
    CHECK(vec.as<double>()[1] == -k);
    CHECK(ds.value("name", i).text() == "name-" + std::to_string(k));
    const auto pts = ds.value("pts", i);
    REQUIRE(pts.shape.ndim == 2);
    CHECK(pts.shape[0] == k % 3 + 1);
    CHECK(pts.shape[1] == 2);
    for (int r = 0; r <= k % 3; ++r) {
      CHECK(pts.as<int64_t>()[2 * size_t(r)] == k);
      CHECK(pts.as<int64_t>()[2 * size_t(r) + 1] == r);
    }
    CHECK(ds.value("cls", i).as<int64_t>()[0] == k % 5);
    const auto m = ds.affine(i);
    CHECK(m[0] == 1.0);
    CHECK(m[2] == 0.0);
    CHECK(m[4] == 1.0);
    CHECK(ds.encoding(i) == BlobEncoding::Png);
    CHECK(ds.blob_ref(i).width == kWidth);
  }
}

TEST_CASE("columns are zero-copy views of the whole field") {
  const Dataset ds(fixture_dataset());
  const Column id = ds.column("id");
  REQUIRE(id.values.shape.ndim == 1);
  CHECK(id.values.shape[0] == kSamples);
  CHECK(id.offsets.empty());
  CHECK(id.values.bytes.data() == ds.value("id", 3).bytes.data() - 3 * 8);
  const Column pts = ds.column("pts");
  REQUIRE(pts.offsets.size() == kSamples + 1);
  CHECK(pts.values.shape[1] == 2);
  CHECK(pts.values.bytes.data() + pts.offsets[5] * 16 == ds.value("pts", 5).bytes.data());
  CHECK(ds.column("__image__.size").values.dtype == DType::I64);
}

TEST_CASE("decode gives the generator's RGB pixels and dense maps keep 16 bits") {
  const Dataset ds(fixture_dataset());
  for (size_t i : {size_t{0}, size_t{7}, size_t{11}}) {
    const Pixels p = ds.decode(i);
    REQUIRE(p.width == kWidth);
    REQUIRE(p.height == kHeight);
    bool same = true;
    for (int y = 0; y < kHeight; ++y)
      for (int x = 0; x < kWidth; ++x)
        for (int c = 0; c < 3; ++c)
          same &= p.data[(size_t(y) * kWidth + size_t(x)) * 3 + size_t(c)] ==
                  expected_pixel(int(i), x, y, c);
    CHECK(same);
    const Pixels d = ds.decode_dense(i, "__depth__");
    REQUIRE(d.dtype == DType::U16);
    REQUIRE(d.channels == 1);
    uint16_t v;
    std::memcpy(&v, d.data.data() + (size_t(5) * kWidth + 3) * 2, 2);
    CHECK(v == 1000 * i + 32 * 5 + 3);
  }
}

TEST_CASE("wrong names, types and indices are clear errors") {
  const Dataset ds(fixture_dataset());
  CHECK_THROWS_AS(ds.value("nope", 0), ArgumentError);
  CHECK_THROWS_AS(ds.column("nope"), ArgumentError);
  CHECK_THROWS_AS(ds.value("id", kSamples), IndexError);
  CHECK_THROWS_AS(ds.key(kSamples), IndexError);
  CHECK_THROWS_AS(ds.value("id", 0).as<float>(), ArgumentError);
  CHECK_THROWS_AS(ds.blob(0, "__mask__"), ArgumentError);
  std::vector<uint8_t> small(16 * 16 * 3);
  CHECK_THROWS_AS(ds.decode_into(0, small, 16, 16, false), DataError);
  ds.decode_into(0, small, 16, 16, true);
}

TEST_CASE("hostile annotation files give errors, never crashes") {
  SECTION("truncated labels.safetensors") {
    const std::string dir = copy_fixture("truncated");
    auto bytes = read_all(dir + "/labels.safetensors");
    for (size_t keep : {size_t{0}, size_t{7}, size_t{100}, bytes.size() - 1}) {
      write_all(dir + "/labels.safetensors", {bytes.begin(), bytes.begin() + long(keep)});
      CHECK_THROWS_AS(Dataset(dir), ParseError);
    }
  }
  SECTION("num_samples that disagrees with the tensors") {
    const std::string dir = copy_fixture("count");
    auto bytes = read_all(dir + "/labels.safetensors");
    const std::string text(bytes.begin(), bytes.end());
    const size_t at = text.find("\"num_samples\":\"12\"");
    REQUIRE(at != std::string::npos);
    bytes[at + 16] = '3';
    write_all(dir + "/labels.safetensors", bytes);
    CHECK_THROWS_AS(Dataset(dir), ParseError);
  }
  SECTION("a flipped key offset") {
    const std::string dir = copy_fixture("flipped");
    poke<int64_t>(dir, "__key__.offsets", 4, 1000000);
    const Dataset ds(dir);
    CHECK(ds.key(2) == "s/0002");
    CHECK_THROWS_AS(ds.key(3), DataError);
    CHECK_THROWS_AS(ds.key(4), DataError);
    poke<int64_t>(dir, "pts.offsets", 2, -5);
    const Dataset ds2(dir);
    CHECK_THROWS_AS(ds2.value("pts", 1), DataError);
  }
  SECTION("a shard index out of range") {
    const std::string dir = copy_fixture("shard");
    poke<int32_t>(dir, "__image__.shard", 1, 4);
    poke<int32_t>(dir, "__image__.shard", 2, -1);
    const Dataset ds(dir);
    CHECK_THROWS_AS(ds.image(1), DataError);
    CHECK_THROWS_AS(ds.decode(2), DataError);
    CHECK(ds.image(0).size() > 0);
  }
  SECTION("an image range beyond its shard") {
    const std::string dir = copy_fixture("range");
    poke<int64_t>(dir, "__image__.offset", 0, int64_t{1} << 40);
    poke<int64_t>(dir, "__image__.size", 1, INT64_MAX);
    poke<int64_t>(dir, "__image__.size", 2, -1);
    const Dataset ds(dir);
    for (size_t i : {0, 1, 2}) CHECK_THROWS_AS(ds.image(i), DataError);
  }
  SECTION("corrupt image bytes") {
    const std::string dir = copy_fixture("corrupt");
    poke<int64_t>(dir, "__image__.size", 3, 40);
    const Dataset ds(dir);
    CHECK_THROWS_AS(ds.decode(3), DataError);
  }
  SECTION("a missing shard") {
    const std::string dir = copy_fixture("missing");
    std::filesystem::remove(dir + "/shard-000002.tar");
    CHECK_THROWS_AS(Dataset(dir), FatalError);
  }
  SECTION("no dataset") {
    CHECK_THROWS_AS(Dataset("/nonexistent/dir"), FatalError);
    const std::string dir = copy_fixture("nolabels");
    std::filesystem::remove(dir + "/labels.safetensors");
    CHECK_THROWS_AS(Dataset(dir), FatalError);
  }
}

// fuzz_dataset found it (corpus/fuzz_dataset/decoded_size_without_size_recursed): an image
// header without a size sent decoded_size into decode, which asked decoded_size again, until
// the stack overflowed. A claimed size over the decode limit made decode allocate it first.
TEST_CASE("decoded_size of an image header with no or a huge size is a DataError") {
  const std::string dir = copy_fixture("header_size");
  const std::vector<std::pair<uint32_t, uint32_t>> sizes{{0, 24}, {32, 0}, {100000, 100000}};
  std::vector<std::pair<std::string, size_t>> where;  // shard file, image offset
  {
    const Dataset ds(dir);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const BlobRef r = ds.blob_ref(i);
      where.emplace_back(dir + "/" + ds.shard_names()[size_t(r.shard)], size_t(r.offset));
    }
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto bytes = read_all(where[i].first);
    // The PNG's IHDR: width and height, big-endian, at bytes 16 and 20.
    for (size_t b = 0; b < 4; ++b) {
      bytes[where[i].second + 16 + b] = uint8_t(sizes[i].first >> (24 - 8 * b));
      bytes[where[i].second + 20 + b] = uint8_t(sizes[i].second >> (24 - 8 * b));
    }
    write_all(where[i].first, bytes);
  }
  const Dataset ds(dir);
  for (size_t i = 0; i < sizes.size(); ++i) {
    CHECK_THROWS_AS(ds.decoded_size(i), DataError);
    CHECK_THROWS_AS(ds.decode(i), DataError);
  }
  CHECK(ds.decoded_size(3) == std::pair{kWidth, kHeight});
}

TEST_CASE("blob_encodings says how blobs are stored: raw pixels need no tar header") {
  // raw3: written by tests/data/datasets/make_datasets.py with blob_encodings {"__image__":
  // "rgb"}; 3 samples of 4x3 raw RGB, pixel bytes = 5 * (byte index) + 50 * k.
  const std::filesystem::path src = TARMAC_TEST_DATA "/datasets/raw3";
  const std::filesystem::path dir = std::filesystem::path(fixture_dataset()).parent_path() / "raw3";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(src, dir, std::filesystem::copy_options::recursive);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    std::filesystem::permissions(e.path(), std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  // Rename every member in the shard's tar headers (name field, bytes 0..99 of each header)
  // from KEY.rgb to KEY.xyz: a reader that still looked at tar headers would no longer know
  // these bytes are raw pixels.
  const std::string shard = (dir / "shard-000000.tar").string();
  auto bytes = read_all(shard);
  int renamed = 0;
  for (size_t h = 0; h + 512 <= bytes.size(); h += 512) {
    char* name = reinterpret_cast<char*>(bytes.data() + h);
    const size_t len = strnlen(name, 100);
    if (std::memcmp(bytes.data() + h + 257, "ustar", 5) == 0 && len > 4 &&
        std::memcmp(name + len - 4, ".rgb", 4) == 0) {
      std::memcpy(name + len - 4, ".xyz", 4);
      ++renamed;
    }
  }
  REQUIRE(renamed == 3);
  write_all(shard, bytes);

  const Dataset ds(dir.string());
  REQUIRE(ds.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(ds.encoding(k) == BlobEncoding::Raw);
    const Pixels p = ds.decode(k);
    REQUIRE(p.width == 4);
    REQUIRE(p.height == 3);
    for (size_t b = 0; b < p.data.size(); ++b)
      CHECK(p.data[b] == static_cast<uint8_t>(5 * b + 50 * k));
    CHECK(ds.value("v", k).as<float>()[0] == static_cast<float>(k) + 0.25f);
  }
}

TEST_CASE("datasets written before blob_encodings still tell their encodings") {
  const Dataset ds(fixture_dataset());  // read12: no blob_encodings entry
  CHECK(ds.metadata().count("blob_encodings") == 0);
  CHECK(ds.encoding(0) == BlobEncoding::Png);
  CHECK(ds.encoding(0, "__depth__") == BlobEncoding::Png);
}

namespace {
std::vector<int64_t> dims(const Shape& s) {
  return {s.span().begin(), s.span().end()};
}
}  // namespace

TEST_CASE("derived columns: listed, read zero-copy per sample, refused when bound elsewhere") {
  const Dataset ds(copy_fixture_with_columns("with-columns"));
  CHECK(ds.derived_names() == std::vector<std::string>{"emb", "lat", "old"});
  const DerivedColumn& emb = ds.derived("emb");
  CHECK(emb.dtype() == DType::F32);
  CHECK(emb.uniform());
  CHECK(dims(emb.values().shape) == std::vector<int64_t>{kSamples, 3});
  const DerivedColumn& lat = ds.derived("lat");
  CHECK(lat.dtype() == DType::U16);
  CHECK_FALSE(lat.uniform());
  for (int k = 0; k < kSamples; ++k) {
    INFO("sample " << k);
    const TensorView e = emb.value(static_cast<size_t>(k));
    CHECK(dims(e.shape) == std::vector<int64_t>{3});
    const auto ev = e.as<float>();
    CHECK(std::vector<float>(ev.begin(), ev.end()) ==
          std::vector<float>{float(k), float(2 * k), float(-k)});
    const TensorView l = lat.value(static_cast<size_t>(k));
    CHECK(dims(l.shape) == std::vector<int64_t>{2, 1 + k % 3});
    const auto lv = l.as<uint16_t>();
    REQUIRE(lv.size() == static_cast<size_t>(2 * (1 + k % 3)));
    for (size_t j = 0; j < lv.size(); ++j) CHECK(lv[j] == 100 * k + static_cast<int>(j));
    // Zero-copy: inside the column's values.
    CHECK(l.bytes.data() >= lat.values().bytes.data());
    CHECK(l.bytes.data() + l.bytes.size() <= lat.values().bytes.data() + lat.values().bytes.size());
  }
  CHECK_THROWS_AS(emb.value(kSamples), IndexError);
  CHECK_THROWS_WITH(ds.derived("old"), Catch::Contains("another version of the dataset"));
  CHECK_THROWS_AS(ds.derived("old"), DataError);  // and again: the error is kept
  CHECK_THROWS_WITH(ds.derived("nope"), Catch::Contains("it has: emb, lat, old"));
}

TEST_CASE("a Dataset with a ShardFetcher maps each shard on first use, once, from any thread") {
  // The annotation file alone in one folder, the shards in another: as a cache keeps them.
  namespace fs = std::filesystem;
  const fs::path root = fs::path(fixture_dataset()).parent_path() / "fetched";
  fs::remove_all(root);
  fs::create_directories(root / "labels");
  fs::copy_file(fs::path(fixture_dataset()) / "labels.safetensors",
                root / "labels" / "labels.safetensors");
  const Dataset local(fixture_dataset());
  std::mutex mu;
  std::vector<size_t> calls;
  bool fail_once = true;
  const Dataset ds((root / "labels").string(), [&](size_t k) {
    std::lock_guard lock(mu);
    calls.push_back(k);
    if (k == 1 && fail_once) {
      fail_once = false;
      throw FatalError("shard 1 could not be fetched (on purpose)");
    }
    return (fs::path(fixture_dataset()) / local.shard_names()[k]).string();
  });
  CHECK(calls.empty());  // nothing at open
  REQUIRE(ds.size() == local.size());
  const size_t in_shard1 = [&] {
    for (size_t i = 0; i < local.size(); ++i)
      if (local.blob_ref(i).shard == 1) return i;
    return local.size();
  }();
  REQUIRE(in_shard1 < local.size());
  CHECK_THROWS_AS(ds.blob(in_shard1), FatalError);  // the fetcher's error, at access
  // Catch2's assertions are not thread-safe: each thread counts its mismatches, checked after.
  std::vector<std::thread> threads;
  std::vector<size_t> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < ds.size(); ++i) {
        const auto a = ds.blob(i), b = local.blob(i);
        if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) ++mismatches[t];
      }
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == std::vector<size_t>(4, 0));
  std::sort(calls.begin(), calls.end());
  std::vector<size_t> want{1};  // shard 1 twice: its failed call, then once more
  for (size_t k = 0; k < local.shard_names().size(); ++k) want.push_back(k);
  std::sort(want.begin(), want.end());
  CHECK(calls == want);
  CHECK(ds.shard_bytes(2).size() == local.shard_bytes(2).size());
  CHECK_THROWS_AS(ds.shard_bytes(99), IndexError);
}
