// The merged annotation file's tensors (lib/merge/merged_labels.cpp), filled from the checked-in
// parts (tests/data/datasets/parts, make_datasets.py: sample i of a part holds key PREFIX/00i, a
// PNG 16 wide and 12 + i % 5 high, and {"cls": i, "score": i (b: i + 0.5), "pts": i % 3 + 1
// points [1.5, 2], "name": "n<i>"}). Every expected value is written out from that description.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../check/part_fixture.h"
#include "merge/merge_internal.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tarmac;
using namespace tarmac::merge_detail;

namespace {

struct MemorySink : ByteSink {
  std::vector<uint8_t> bytes;
  void write(std::span<const uint8_t> b) override { bytes.insert(bytes.end(), b.begin(), b.end()); }
};

struct Filled {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Every tensor's bytes, by name, each checked to be exactly as long as its shape says; and the
// names in order.
std::map<std::string, Filled> fill_all(const std::vector<TensorSpec>& tensors,
                                       std::vector<std::string>& names) {
  std::map<std::string, Filled> out;
  for (const auto& t : tensors) {
    MemorySink sink;
    t.fill(sink);
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    INFO(t.name);
    CHECK(sink.bytes.size() == elements * dtype_size(t.dtype));
    names.push_back(t.name);
    out[t.name] = {t.dtype, t.shape, std::move(sink.bytes)};
  }
  return out;
}

template <typename T>
std::vector<T> as_values(const Filled& f) {
  REQUIRE(f.bytes.size() % sizeof(T) == 0);
  std::vector<T> v(f.bytes.size() / sizeof(T));
  std::memcpy(v.data(), f.bytes.data(), f.bytes.size());
  return v;
}

struct OpenedParts {
  std::vector<std::unique_ptr<Part>> all;
  std::vector<const Part*> parts;
};

OpenedParts open_fixture_parts(const std::string& test, const std::vector<std::string>& names) {
  const fs::path root = test::temp_dir("merge", test);
  std::vector<std::string> paths;
  for (const auto& n : names) paths.push_back(testing::copy_part(root, n, n));
  OpenedParts o;
  o.all = open_parts(paths);
  for (const auto& p : o.all) o.parts.push_back(p.get());
  return o;
}

FieldSpec merged_field(const std::string& name, FieldKind kind, DType dtype,
                       std::vector<int64_t> shape, bool ragged, bool nullable = false) {
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.ragged = ragged;
  f.source = "json";
  f.nullable = nullable;
  return f;
}

}  // namespace

TEST_CASE("merged_tensors joins keys and blob records, shards renumbered from each base") {
  const OpenedParts o = open_fixture_parts("tensors_blobs", {"a", "b"});
  std::vector<std::string> names;
  const std::vector<int32_t> base{0, 7};  // b's shards placed from 7 on
  const auto t = fill_all(merged_tensors(o.parts, {}, base, 9), names);
  CHECK(names == std::vector<std::string>{"__key__.values", "__key__.offsets", "__affine__",
                                          "__image__.offset", "__image__.size", "__image__.crc32",
                                          "__image__.width", "__image__.height",
                                          "__image__.shard"});
  const Filled& keys = t.at("__key__.values");
  CHECK(keys.shape == std::vector<int64_t>{45});
  CHECK(std::string(keys.bytes.begin(), keys.bytes.end()) ==
        "a/000a/001a/002a/003a/004b/000b/001b/002b/003");
  CHECK(as_values<int64_t>(t.at("__key__.offsets")) ==
        std::vector<int64_t>{0, 5, 10, 15, 20, 25, 30, 35, 40, 45});
  // a: 3 samples in its shard 0, 2 in 1; b: 3 in its 0, 1 in its 1.
  CHECK(t.at("__image__.shard").shape == std::vector<int64_t>{9});
  CHECK(as_values<int32_t>(t.at("__image__.shard")) ==
        std::vector<int32_t>{0, 0, 0, 1, 1, 7, 7, 7, 8});
  CHECK(as_values<int32_t>(t.at("__image__.height")) ==
        std::vector<int32_t>{12, 13, 14, 15, 16, 12, 13, 14, 15});
  CHECK(as_values<int32_t>(t.at("__image__.width")) == std::vector<int32_t>(9, 16));
  CHECK(t.at("__affine__").shape == std::vector<int64_t>{9, 2, 3});
  // Parts written before blob_encodings was recorded: the merge records none either.
  CHECK_FALSE(merged_encoding(o.parts, 0).has_value());
}

TEST_CASE("merged_tensors converts fields to the merged dtype and rebases ragged offsets") {
  const OpenedParts o = open_fixture_parts("tensors_fields", {"a", "b"});
  const std::vector<FieldSpec> fields{
      merged_field("score", FieldKind::Numeric, DType::F64, {}, false),  // I64 in a
      merged_field("cls", FieldKind::Numeric, DType::I64, {}, false, true),
      merged_field("pts", FieldKind::Numeric, DType::F64, {-1, 2}, true),
      merged_field("name", FieldKind::String, DType::U8, {-1}, true),
  };
  std::vector<std::string> names;
  const auto t = fill_all(merged_tensors(o.parts, fields, {0, 2}, 9), names);
  CHECK(as_values<double>(t.at("score")) == std::vector<double>{0, 1, 2, 3, 4, 0.5, 1.5, 2.5, 3.5});
  CHECK(as_values<int64_t>(t.at("cls")) == std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3});
  // Never null in a part that has no mask: all valid.
  CHECK(t.at("cls.valid").bytes == std::vector<uint8_t>(9, 1));
  CHECK_FALSE(t.count("score.valid"));
  // pts: 1, 2, 3, 1, 2 points in a, then 1, 2, 3, 1 in b.
  CHECK(as_values<int64_t>(t.at("pts.offsets")) ==
        std::vector<int64_t>{0, 1, 3, 6, 7, 9, 10, 12, 15, 16});
  CHECK(t.at("pts.values").shape == std::vector<int64_t>{16, 2});
  std::vector<double> pts;
  for (int i = 0; i < 16; ++i) pts.insert(pts.end(), {1.5, 2});
  CHECK(as_values<double>(t.at("pts.values")) == pts);
  const Filled& name = t.at("name.values");
  CHECK(std::string(name.bytes.begin(), name.bytes.end()) == "n0n1n2n3n4n0n1n2n3");
  CHECK(as_values<int64_t>(t.at("name.offsets")) ==
        std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18});
}

TEST_CASE("merged_tensors: a part's fixed rows join another's ragged ones; a lacking part") {
  // "pts" is fixed [1, 2] in a1 (one sample) and ragged in b2 (1 and 2 points).
  const OpenedParts o = open_fixture_parts("tensors_mixed", {"a1", "b2"});
  REQUIRE_FALSE(o.parts[0]->a.layout().find_field("pts")->spec.ragged);
  const std::vector<FieldSpec> fields{
      merged_field("pts", FieldKind::Numeric, DType::F32, {-1, 2}, true),
      // a field neither part has: zeros, and invalid everywhere
      merged_field("extra", FieldKind::Numeric, DType::I32, {2}, false, true),
  };
  std::vector<std::string> names;
  const auto t = fill_all(merged_tensors(o.parts, fields, {0, 1}, 3), names);
  CHECK(as_values<int64_t>(t.at("pts.offsets")) == std::vector<int64_t>{0, 1, 2, 4});
  CHECK(as_values<float>(t.at("pts.values")) ==
        std::vector<float>{1.5f, 2, 1.5f, 2, 1.5f, 2, 1.5f, 2});
  CHECK(t.at("extra").shape == std::vector<int64_t>{3, 2});
  CHECK(as_values<int32_t>(t.at("extra")) == std::vector<int32_t>(6, 0));
  CHECK(t.at("extra.valid").bytes == std::vector<uint8_t>(3, 0));
}
