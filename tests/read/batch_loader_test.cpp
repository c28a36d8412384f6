#include "read/batch_loader.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "dataset_fixture.h"
#include "support/values.h"

using namespace tarmac;
using namespace tarmac::test;

namespace {}  // namespace

TEST_CASE("a batch equals decoding and stacking its samples one by one") {
  const Dataset ds(fixture_dataset());
  BatchLoader loader(ds, {kWidth, kHeight, false, 3, {"id", "vec", "__affine__"}});
  const std::vector<int64_t> idx{5, 0, 11, 5, 3};
  const size_t img = size_t(kWidth) * kHeight * 3;
  std::vector<uint8_t> images(idx.size() * img);
  std::vector<int64_t> ids(idx.size());
  std::vector<double> vecs(idx.size() * 3), affines(idx.size() * 6);
  loader.load(idx, {images, {bytes_of(ids), bytes_of(vecs), bytes_of(affines)}});
  for (size_t j = 0; j < idx.size(); ++j) {
    const auto i = static_cast<size_t>(idx[j]);
    const Pixels p = ds.decode(i);
    CHECK(std::memcmp(images.data() + j * img, p.data.data(), img) == 0);
    CHECK(ids[j] == idx[j]);
    CHECK(vecs[3 * j] == 1.5 * double(idx[j]));
    CHECK(affines[6 * j] == 1.0);
  }
}

TEST_CASE("the next batch loads while the caller reads the current one") {
  const Dataset ds(fixture_dataset());
  BatchLoader loader(ds, {kWidth, kHeight, false, 2, {"cls"}});
  const size_t img = size_t(kWidth) * kHeight * 3;
  std::vector<uint8_t> a(4 * img), b(4 * img);
  std::vector<int64_t> ca(4), cb(4);
  loader.start({0, 1, 2, 3}, {a, {bytes_of(ca)}});
  loader.wait();
  loader.start({4, 5, 6, 7}, {b, {bytes_of(cb)}});
  CHECK(ca == std::vector<int64_t>{0, 1, 2, 3});
  loader.wait();
  CHECK(cb == std::vector<int64_t>{4, 0, 1, 2});
  CHECK(a[0] == expected_pixel(0, 0, 0, 0));
  CHECK(b[0] == expected_pixel(4, 0, 0, 0));
}

TEST_CASE("batch errors are clear") {
  const Dataset ds(fixture_dataset());
  CHECK_THROWS_AS(BatchLoader(ds, {kWidth, kHeight, false, 1, {"pts"}}), ArgumentError);
  CHECK_THROWS_AS(BatchLoader(ds, {kWidth, kHeight, false, 1, {"nope"}}), ArgumentError);
  BatchLoader loader(ds, {kWidth, kHeight, false, 1, {}});
  std::vector<uint8_t> small(10);
  CHECK_THROWS_AS(loader.load({0}, {small, {}}), ArgumentError);
  std::vector<uint8_t> one(size_t(kWidth) * kHeight * 3);
  CHECK_THROWS_AS(loader.load({kSamples}, {one, {}}), IndexError);
  BatchLoader other_size(ds, {16, 16, false, 2, {}});
  std::vector<uint8_t> two(2 * 16 * 16 * 3);
  CHECK_THROWS_AS(other_size.load({0, 1}, {two, {}}), DataError);
  BatchLoader resizing(ds, {16, 16, true, 2, {}});
  resizing.load({0, 1}, {two, {}});
}

// Run under ThreadSanitizer by scripts/ci-sanitize.sh: many double-buffered batches on four
// threads (the next batch decodes while this one is checked), resizing on, each batch equal to
// decoding its samples one by one on this thread.
TEST_CASE("many prefetched batches on four threads equal single-threaded decoding") {
  const Dataset ds(fixture_dataset());
  constexpr int w = 20, h = 15, batch = 5, batches = 24;
  BatchLoader loader(ds, {w, h, true, 4, {"id", "vec", "__affine__"}});
  const size_t img = size_t(w) * h * 3;
  struct Buffers {
    std::vector<int64_t> idx, ids;
    std::vector<uint8_t> images;
    std::vector<double> vecs, affines;
  };
  auto make = [&](int b) {
    Buffers x;
    for (int j = 0; j < batch; ++j) x.idx.push_back((b * 7 + j * 5) % kSamples);
    x.images.resize(batch * img);
    x.ids.resize(batch);
    x.vecs.resize(batch * 3);
    x.affines.resize(batch * 6);
    return x;
  };
  auto start = [&](Buffers& x) {
    loader.start(x.idx, {x.images, {bytes_of(x.ids), bytes_of(x.vecs), bytes_of(x.affines)}});
  };
  std::vector<uint8_t> ref(img);
  Buffers cur = make(0);
  start(cur);
  for (int b = 0; b < batches; ++b) {
    loader.wait();
    Buffers next = make(b + 1);
    if (b + 1 < batches) start(next);
    for (size_t j = 0; j < cur.idx.size(); ++j) {
      const auto i = static_cast<size_t>(cur.idx[j]);
      ds.decode_into(i, ref, w, h, true);
      CHECK(std::memcmp(cur.images.data() + j * img, ref.data(), img) == 0);
      CHECK(cur.ids[j] == cur.idx[j]);
      CHECK(std::memcmp(&cur.vecs[3 * j], ds.value("vec", i).bytes.data(), 24) == 0);
      CHECK(std::memcmp(&cur.affines[6 * j], ds.affine(i).data(), 48) == 0);
    }
    cur = std::move(next);
  }
}

TEST_CASE("a grey batch holds each colour image converted with OpenCV's weights") {
  const Dataset ds(fixture_dataset());
  REQUIRE(ds.decoded_channels(0) == 3);
  BatchOptions o{kWidth, kHeight, false, 2, {}};
  o.channels = 1;
  BatchLoader loader(ds, o);
  const std::vector<int64_t> idx{2, 7};
  const size_t img = size_t(kWidth) * kHeight;
  std::vector<uint8_t> images(idx.size() * img);
  loader.load(idx, {images, {}});
  for (size_t j = 0; j < idx.size(); ++j) {
    const Pixels p = ds.decode(static_cast<size_t>(idx[j]));
    // Y = (9798 R + 19235 G + 3735 B + 2^14) >> 15: OpenCV 4.6's fixed-point 0.299/0.587/0.114.
    for (size_t k = 0; k < img; ++k) {
      const int r = p.data[3 * k], g = p.data[3 * k + 1], b = p.data[3 * k + 2];
      const int y = (9798 * r + 19235 * g + 3735 * b + (1 << 14)) >> 15;
      REQUIRE(images[j * img + k] == y);
    }
  }
  o.channels = 2;
  CHECK_THROWS_AS(BatchLoader(ds, o), ArgumentError);
  std::vector<uint8_t> small(img);
  CHECK_THROWS_AS(ds.decode_into(0, small, kWidth, kHeight, false, 3), ArgumentError);
}
