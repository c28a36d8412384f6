#include "read/c_api.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dataset_fixture.h"
#include "read/augment.h"

using namespace tarmac::test;

TEST_CASE("the C API reads what the C++ API reads and reports errors by code") {
  CHECK(tarmac_api_version() == TARMAC_C_API_VERSION);
  tarmac_dataset* ds = nullptr;
  CHECK(tarmac_open("/nonexistent", &ds) == TARMAC_E_IO);
  CHECK(std::string(tarmac_last_error()).find("/nonexistent") != std::string::npos);
  CHECK(tarmac_open("s3://bucket/ds/", &ds) == TARMAC_E_INVALID);
  CHECK(std::string(tarmac_last_error()).find("tarmac_open_cached") != std::string::npos);
  CHECK(tarmac_open_cached("s3://bucket/ds/", "", 0, &ds) == TARMAC_E_INVALID);
  CHECK(tarmac_open_cached("/a/local/folder", "/tmp/c", 0, &ds) == TARMAC_E_INVALID);
  REQUIRE(tarmac_open(fixture_dataset().c_str(), &ds) == TARMAC_OK);
  CHECK(tarmac_size(ds) == kSamples);
  CHECK(std::string(tarmac_metadata(ds, "format")) == "tarmac/1");

  const char* key;
  size_t len;
  REQUIRE(tarmac_key(ds, 3, &key, &len) == TARMAC_OK);
  CHECK(std::string(key, len) == "s/0003");
  CHECK(tarmac_key(ds, kSamples, &key, &len) == TARMAC_E_RANGE);
  CHECK(tarmac_key(ds, -1, &key, &len) == TARMAC_E_RANGE);

  int64_t nf = 0;
  REQUIRE(tarmac_num_fields(ds, &nf) == TARMAC_OK);
  CHECK(nf == 5);
  tarmac_field f;
  REQUIRE(tarmac_field_info(ds, 3, &f) == TARMAC_OK);
  CHECK(std::string(f.name) == "pts");
  CHECK(f.ragged == 1);
  CHECK(std::string(tarmac_dtype_name(f.dtype)) == "I64");

  tarmac_tensor t;
  REQUIRE(tarmac_value(ds, "pts", 5, &t) == TARMAC_OK);
  CHECK(t.ndim == 2);
  CHECK(t.shape[0] == 3);
  CHECK(static_cast<const int64_t*>(t.data)[0] == 5);
  REQUIRE(tarmac_column(ds, "pts", &t) == TARMAC_OK);
  CHECK(t.offsets != nullptr);
  CHECK(tarmac_value(ds, "nope", 0, &t) == TARMAC_E_INVALID);
  CHECK(std::string(tarmac_last_error()).find("nope") != std::string::npos);

  // A blob is its shard's bytes at the annotation file's offset (what bindings slice).
  int64_t shards = 0;
  REQUIRE(tarmac_num_shards(ds, &shards) == TARMAC_OK);
  REQUIRE(shards >= 1);
  int32_t shard = -1;
  int64_t offset = -1, blob_size = -1;
  REQUIRE(tarmac_blob_ref(ds, 4, nullptr, &shard, &offset, &blob_size, nullptr, nullptr, nullptr) ==
          TARMAC_OK);
  const uint8_t *shard_data = nullptr, *blob_data = nullptr;
  size_t shard_size = 0, blob_len = 0;
  REQUIRE(tarmac_shard(ds, shard, &shard_data, &shard_size) == TARMAC_OK);
  REQUIRE(tarmac_blob(ds, 4, nullptr, &blob_data, &blob_len) == TARMAC_OK);
  CHECK(blob_data == shard_data + offset);
  CHECK(blob_len == static_cast<size_t>(blob_size));
  CHECK(static_cast<uint64_t>(offset + blob_size) <= shard_size);
  CHECK(tarmac_shard(ds, shards, &shard_data, &shard_size) == TARMAC_E_RANGE);
  CHECK(tarmac_shard(ds, -1, &shard_data, &shard_size) == TARMAC_E_RANGE);

  int32_t w = 0, h = 0;
  REQUIRE(tarmac_decoded_size(ds, 0, &w, &h) == TARMAC_OK);
  CHECK(w == kWidth);
  std::vector<uint8_t> px(size_t(w) * size_t(h) * 3);
  REQUIRE(tarmac_decode(ds, 2, px.data(), px.size(), w, h, 0) == TARMAC_OK);
  CHECK(px[3] == expected_pixel(2, 1, 0, 0));

  const char* fields[] = {"id"};
  tarmac_loader* loader = nullptr;
  REQUIRE(tarmac_loader_new(ds, w, h, 0, 2, fields, 1, &loader) == TARMAC_OK);
  std::vector<uint8_t> images(2 * px.size());
  std::vector<int64_t> ids(2);
  void* labels[] = {ids.data()};
  size_t sizes[] = {ids.size() * 8};
  const int64_t idx[] = {9, 1};
  REQUIRE(tarmac_loader_start(loader, idx, 2, images.data(), images.size(), labels, sizes) ==
          TARMAC_OK);
  REQUIRE(tarmac_loader_wait(loader) == TARMAC_OK);
  CHECK(ids == std::vector<int64_t>{9, 1});
  CHECK(tarmac_loader_start(loader, idx, 2, images.data(), 5, labels, sizes) == TARMAC_E_INVALID);
  tarmac_loader_free(loader);

  uint64_t per = 0;
  REQUIRE(tarmac_partition_size(10, 1, 3, 0, &per) == TARMAC_OK);
  CHECK(per == 4);
  std::vector<int64_t> out(per);
  CHECK(tarmac_indices(10, 1, 3, 0, 0, 1, 0, out.data(), out.size()) == TARMAC_OK);
  CHECK(tarmac_indices(10, 3, 3, 0, 0, 1, 0, out.data(), out.size()) == TARMAC_E_INVALID);
  tarmac_close(ds);
}

TEST_CASE("the C API lists and reads derived columns") {
  tarmac_dataset* ds = nullptr;
  REQUIRE(tarmac_open(copy_fixture_with_columns("c-columns").c_str(), &ds) == TARMAC_OK);
  int64_t n = 0;
  REQUIRE(tarmac_num_derived(ds, &n) == TARMAC_OK);
  REQUIRE(n == 3);
  const char* name = nullptr;
  REQUIRE(tarmac_derived_name(ds, 1, &name) == TARMAC_OK);
  CHECK(std::string(name) == "lat");
  CHECK(tarmac_derived_name(ds, 3, &name) == TARMAC_E_RANGE);
  tarmac_tensor t;
  REQUIRE(tarmac_derived_value(ds, "lat", 5, &t) == TARMAC_OK);
  CHECK(std::string(tarmac_dtype_name(t.dtype)) == "U16");
  CHECK((t.ndim == 2 && t.shape[0] == 2 && t.shape[1] == 3));
  CHECK(t.nbytes == 12);
  CHECK(static_cast<const uint16_t*>(t.data)[5] == 505);
  CHECK(t.offsets == nullptr);
  tarmac_tensor shapes;
  REQUIRE(tarmac_derived_column(ds, "emb", &t, &shapes) == TARMAC_OK);
  CHECK((t.ndim == 2 && t.shape[0] == kSamples && t.shape[1] == 3));
  CHECK(static_cast<const float*>(t.data)[3 * 7 + 1] == 14.0f);
  REQUIRE(tarmac_derived_column(ds, "lat", &t, &shapes) == TARMAC_OK);
  REQUIRE(t.offsets != nullptr);
  CHECK(t.offsets[kSamples] == 2 * (4 * 1 + 4 * 2 + 4 * 3));
  CHECK(tarmac_derived_value(ds, "old", 0, &t) == TARMAC_E_DATA);
  CHECK(std::string(tarmac_last_error()).find("another version") != std::string::npos);
  CHECK(tarmac_derived_value(ds, "nope", 0, &t) == TARMAC_E_INVALID);
  tarmac_close(ds);
}

TEST_CASE("the C API's augmented loader: the C++ draws, seeded starts, errors by code") {
  tarmac_dataset* ds = nullptr;
  REQUIRE(tarmac_open(fixture_dataset().c_str(), &ds) == TARMAC_OK);
  tarmac_augment aug{};
  aug.width = 16;
  aug.height = 12;
  aug.flip = 0.5;
  aug.rotate = 10;
  const int32_t pairs[] = {0, 3};
  aug.flip_pairs = pairs;
  aug.nflip_pairs = 1;
  const char* points[] = {"vec"};
  aug.points = points;
  aug.npoints = 1;
  const char* fields[] = {"vec", "__augment__", "__flip__"};
  tarmac_loader* loader = nullptr;
  CHECK(tarmac_loader_new_augment(ds, &aug, 3, 1, fields, 3, &loader) == TARMAC_E_INVALID);
  CHECK(std::string(tarmac_last_error()).find("flip_pairs") != std::string::npos);
  aug.nflip_pairs = 0;
  REQUIRE(tarmac_loader_new_augment(ds, &aug, 3, 2, fields, 3, &loader) == TARMAC_OK);
  uint64_t bytes = 0;
  REQUIRE(tarmac_loader_field_bytes(loader, 1, &bytes) == TARMAC_OK);
  CHECK(bytes == 48);
  CHECK(tarmac_loader_field_bytes(loader, 3, &bytes) == TARMAC_E_RANGE);
  tarmac_tensor layout;
  REQUIRE(tarmac_loader_field_layout(loader, 1, &layout) == TARMAC_OK);
  CHECK(std::string(tarmac_dtype_name(layout.dtype)) == "F64");
  CHECK((layout.ndim == 2 && layout.shape[0] == 2 && layout.shape[1] == 3));
  CHECK((layout.data == nullptr && layout.nbytes == 48));
  REQUIRE(tarmac_loader_field_layout(loader, 2, &layout) == TARMAC_OK);
  CHECK((std::string(tarmac_dtype_name(layout.dtype)) == "BOOL" && layout.ndim == 0));
  CHECK(tarmac_loader_field_layout(loader, 3, &layout) == TARMAC_E_RANGE);
  const int64_t idx[] = {4, 9};
  std::vector<uint8_t> images(2 * 16 * 12 * 3);
  std::vector<double> vec(6), m(12);
  std::vector<uint8_t> flip(2);
  void* labels[] = {vec.data(), m.data(), flip.data()};
  const size_t sizes[] = {vec.size() * 8, m.size() * 8, flip.size()};
  REQUIRE(tarmac_loader_start_seeded(loader, 5, 6, idx, 2, images.data(), images.size(), labels,
                                     sizes) == TARMAC_OK);
  REQUIRE(tarmac_loader_wait(loader) == TARMAC_OK);
  tarmac::Augment a;
  a.width = 16;
  a.height = 12;
  a.flip = 0.5;
  a.rotate = 10;
  for (size_t j = 0; j < 2; ++j) {
    const tarmac::AugmentDraw d = tarmac::draw_augment(a, kWidth, kHeight, 5, 6, size_t(idx[j]));
    for (size_t k = 0; k < 6; ++k) CHECK(m[6 * j + k] == d.m[k]);
    CHECK(flip[j] == (d.flip ? 1 : 0));
    CHECK(vec[3 * j] == Approx(d.m[0] * 1.5 * double(idx[j]) - d.m[1] * double(idx[j]) + d.m[2]));
  }
  tarmac_loader_free(loader);
  aug.scale_min = 2;
  aug.scale_max = 1;
  CHECK(tarmac_loader_new_augment(ds, &aug, 3, 1, fields, 3, &loader) == TARMAC_E_INVALID);
  CHECK(std::string(tarmac_last_error()).find("scale") != std::string::npos);
  tarmac_close(ds);
}
