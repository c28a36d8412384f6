// column merge against parts written here byte by byte from docs/format.md 8 (records as JSON
// text, chunks as safetensors files), not by derive or by our writer, and the merged column
// read back with a few lines of safetensors (format.md 1) and zlib's CRC-32: a bug in merge
// and one in a writer of ours cannot cancel out.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "check/part_fixture.h"
#include "columns/column_ops.h"
#include "common/error.h"
#include "support/temp_dir.h"

using namespace tarmac;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kN = 12;  // samples of the checked-in dataset s12
constexpr const char* kColumn = "emb";

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(f.good());
}

std::string crc_hex(const std::vector<uint8_t>& b) {
  const uLong crc = crc32(crc32(0, nullptr, 0), b.data(), static_cast<uInt>(b.size()));
  char text[9];
  std::snprintf(text, sizeof text, "%08lx", crc);
  return text;
}

template <class T>
std::vector<uint8_t> le_bytes(const std::vector<T>& v) {  // the test machine is little-endian
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::string dims_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ",") + std::to_string(d);
  return "[" + s + "]";
}

struct Tensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// A safetensors file (format.md 1): u64 header length, the JSON header padded with spaces to
// a multiple of 8, the tensors back to back in the order given.
std::vector<uint8_t> safetensors_file(const std::vector<Tensor>& tensors) {
  std::string h = R"({"__metadata__":{"format":"tarmac-column-chunk/1"})";
  uint64_t at = 0;
  for (const Tensor& t : tensors) {
    h += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + dims_text(t.shape) +
         ",\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + t.data.size()) +
         "]}";
    at += t.data.size();
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  std::vector<uint8_t> out;
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<uint8_t>(uint64_t{h.size()} >> (8 * k)));
  out.insert(out.end(), h.begin(), h.end());
  for (const Tensor& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

// What the test computes for sample i: its output's shape and value bytes, and its digest.
struct Output {
  std::vector<int64_t> shape;
  std::vector<uint8_t> values;
};
using OutputOf = Output (*)(uint64_t);

// F32 [3] per sample: [i + 0.25, 2i, -(i + 1)].
Output f32_output(uint64_t i) {
  const auto x = static_cast<float>(i);
  return {{3}, le_bytes(std::vector<float>{x + 0.25f, 2 * x, -(x + 1)})};
}

// F64 [3] per sample: [i, -i, 0.5].
Output f64_output(uint64_t i) {
  const auto x = static_cast<double>(i);
  return {{3}, le_bytes(std::vector<double>{x, -x, 0.5})};
}

// U16 [1 + i % 3] per sample, 100 i + j: ragged.
Output u16_output(uint64_t i) {
  std::vector<uint16_t> v;
  for (uint64_t j = 0; j < 1 + i % 3; ++j) v.push_back(static_cast<uint16_t>(100 * i + j));
  return {{static_cast<int64_t>(v.size())}, le_bytes(v)};
}

std::vector<uint8_t> digest_of(uint64_t i) {
  std::vector<uint8_t> d(16);
  for (size_t k = 0; k < d.size(); ++k) d[k] = static_cast<uint8_t>(i * 16 + k);
  return d;
}

// A chunk holding the outputs of `samples` in that order (format.md 8).
std::vector<uint8_t> chunk_file(const std::vector<int64_t>& samples, OutputOf out,
                                const std::string& dtype, bool digest) {
  std::vector<int64_t> shapes;
  std::vector<uint8_t> values, digests;
  int64_t ndim = 0;
  for (int64_t i : samples) {
    const Output o = out(static_cast<uint64_t>(i));
    ndim = static_cast<int64_t>(o.shape.size());
    shapes.insert(shapes.end(), o.shape.begin(), o.shape.end());
    values.insert(values.end(), o.values.begin(), o.values.end());
    const std::vector<uint8_t> d = digest_of(static_cast<uint64_t>(i));
    digests.insert(digests.end(), d.begin(), d.end());
  }
  const auto k = static_cast<int64_t>(samples.size());
  const int64_t esz = dtype == "F64" ? 8 : dtype == "F32" ? 4 : 2;
  std::vector<Tensor> t{{"index", "I64", {k}, le_bytes(samples)},
                        {"shape", "I64", {k, ndim}, le_bytes(shapes)},
                        {"values", dtype, {static_cast<int64_t>(values.size()) / esz}, values}};
  if (digest) t.push_back({"digest", "U8", {k, 16}, digests});
  return safetensors_file(t);
}

struct ChunkSpec {
  ChunkSpec(std::vector<int64_t> s, std::string t = "F32", OutputOf o = nullptr)
      : samples(std::move(s)), dtype(std::move(t)), out(o) {}
  std::vector<int64_t> samples;
  std::string dtype;
  OutputOf out;  // the fixture's when null
};

struct PartSpec {
  PartSpec(uint64_t r, uint64_t w, uint64_t b, uint64_t e, std::vector<ChunkSpec> c)
      : rank(r), world(w), begin(b), end(e), chunks(std::move(c)) {}
  uint64_t rank, world, begin, end;
  std::vector<ChunkSpec> chunks;
  std::string column = kColumn;
  std::optional<std::string> labels_crc32;  // the dataset's when not given
  int64_t bytes_off = 0;                    // added to each chunk's recorded size
};

std::string five(uint64_t v) {
  char s[8];
  std::snprintf(s, sizeof s, "%05llu", static_cast<unsigned long long>(v));
  return s;
}

std::vector<int64_t> range_of(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

// A copy of the dataset s12 into which parts are written.
struct Fixture {
  fs::path dir, parts;
  std::string labels_crc32;
  OutputOf out = f32_output;
  bool digest = false;

  explicit Fixture(const std::string& name) {
    dir = testing::copy_part(test::temp_dir("columns", name), "ds", "s12");
    parts = dir / "columns" / (std::string(kColumn) + ".parts");
    fs::create_directories(parts);
    labels_crc32 = crc_hex(file_bytes(dir / "labels.safetensors"));
  }

  // Writes the part's chunks and its record; returns the chunk files' paths.
  std::vector<fs::path> write_part(const PartSpec& p) const {
    const std::string stem = "part-" + five(p.rank) + "-of-" + five(p.world);
    std::string chunks;
    std::vector<fs::path> files;
    uint64_t done = 0;
    for (size_t c = 0; c < p.chunks.size(); ++c) {
      char name[64];
      std::snprintf(name, sizeof name, "%s.chunk-%06zu.safetensors", stem.c_str(), c);
      const std::vector<uint8_t> bytes = chunk_file(
          p.chunks[c].samples, p.chunks[c].out ? p.chunks[c].out : out, p.chunks[c].dtype, digest);
      write_bytes(parts / name, bytes);
      files.push_back(parts / name);
      const uint64_t recorded = bytes.size() + static_cast<uint64_t>(p.bytes_off);
      chunks += std::string(c ? ", " : "") + R"({"file": ")" + name + R"(", "samples": )" +
                std::to_string(p.chunks[c].samples.size()) + R"(, "bytes": )" +
                std::to_string(recorded) + R"(, "crc32": ")" + crc_hex(bytes) + "\"}";
      done += p.chunks[c].samples.size();
    }
    // clang-format off
    const std::string record =
        R"js({"format": "tarmac-column-part/1", "column": ")js" + p.column +
        R"js(", "rank": )js" + std::to_string(p.rank) +
        R"js(, "world": )js" + std::to_string(p.world) +
        R"js(, "begin": )js" + std::to_string(p.begin) +
        R"js(, "end": )js" + std::to_string(p.end) +
        R"js(, "dataset": {"labels_crc32": ")js" + p.labels_crc32.value_or(labels_crc32) +
        R"js(", "num_samples": )js" + std::to_string(kN) +
        R"js(}, "fn": "emb:encode", "tool": "tarmac 0.1.0 (python)", "batch_size": 4,
 "fields": [], "fn_version": "", "digest": ")js" +
        (digest ? "blake2b-128/tarmac-derive-input-1" : "") +
        R"js(", "reused": 0, "chunks": [)js" + chunks +
        R"js(], "done": )js" + std::to_string(done) + R"js(, "complete": true})js";
    // clang-format on
    write_bytes(parts / (stem + ".json"), std::vector<uint8_t>(record.begin(), record.end()));
    return files;
  }

  ColumnMergeResult merge(bool keep_parts = false) const {
    ColumnMergeOptions o;
    o.dir = dir.string();
    o.name = kColumn;
    o.keep_parts = keep_parts;
    o.command = "column_merge_test";
    return merge_column(o);
  }

  // The message of the exception E the merge throws (another type fails the test).
  template <class E>
  std::string refusal() const {
    try {
      merge();
    } catch (const E& e) {
      CHECK_FALSE(fs::exists(dir / "columns" / (std::string(kColumn) + ".safetensors")));
      CHECK(fs::is_directory(parts));  // nothing removed
      return e.what();
    }
    FAIL("the merge was not refused");
    return "";
  }
};

// The two parts of a world of 2 over s12 (shares 0..6 and 6..12), samples in scrambled order.
void write_good_parts(const Fixture& f) {
  f.write_part({0, 2, 0, 6, {{{2, 0, 1}}, {{5, 3, 4}}}});
  f.write_part({1, 2, 6, 12, {{{11, 10, 9, 8, 7, 6}}}});
}

// The merged column's tensors as bytes, and its metadata, read with format.md 1 alone.
struct Merged {
  nlohmann::json header;
  std::vector<uint8_t> file;
  std::vector<uint8_t> tensor(const std::string& name) const {
    const auto& o = header.at(name).at("data_offsets");
    const size_t start = 8 + header_size;
    return {file.begin() + static_cast<ptrdiff_t>(start + o[0].get<size_t>()),
            file.begin() + static_cast<ptrdiff_t>(start + o[1].get<size_t>())};
  }
  std::string meta(const std::string& key) const {
    return header.at("__metadata__").at(key).get<std::string>();
  }
  size_t header_size = 0;
};

Merged read_merged(const Fixture& f) {
  Merged m;
  m.file = file_bytes(f.dir / "columns" / (std::string(kColumn) + ".safetensors"));
  REQUIRE(m.file.size() >= 8);
  for (int k = 0; k < 8; ++k) m.header_size |= size_t{m.file[static_cast<size_t>(k)]} << (8 * k);
  REQUIRE(8 + m.header_size <= m.file.size());
  m.header = nlohmann::json::parse(m.file.begin() + 8,
                                   m.file.begin() + 8 + static_cast<ptrdiff_t>(m.header_size));
  return m;
}

// What the merged column must hold for `out`: values, offsets, shapes in sample order.
void check_merged(const Fixture& f, const ColumnMergeResult& r) {
  std::vector<uint8_t> values, digests;
  std::vector<int64_t> offsets{0}, shapes;
  for (uint64_t i = 0; i < kN; ++i) {
    const Output o = f.out(i);
    values.insert(values.end(), o.values.begin(), o.values.end());
    int64_t elements = 1;
    for (int64_t d : o.shape) elements *= d;
    offsets.push_back(offsets.back() + elements);
    shapes.insert(shapes.end(), o.shape.begin(), o.shape.end());
    const std::vector<uint8_t> d = digest_of(i);
    digests.insert(digests.end(), d.begin(), d.end());
  }
  const Merged m = read_merged(f);
  CHECK(m.tensor("values") == values);
  CHECK(m.tensor("offsets") == le_bytes(offsets));
  CHECK(m.tensor("shapes") == le_bytes(shapes));
  CHECK(m.header.at("offsets").at("shape") == nlohmann::json::array({kN + 1}));
  CHECK(m.meta("values_crc32") == crc_hex(values));
  CHECK(m.meta("offsets_crc32") == crc_hex(le_bytes(offsets)));
  CHECK(m.meta("shapes_crc32") == crc_hex(le_bytes(shapes)));
  CHECK(m.meta("format") == "tarmac-column/1");
  CHECK(m.meta("column") == kColumn);
  CHECK(m.meta("num_samples") == std::to_string(kN));
  CHECK(m.meta("labels_crc32") == f.labels_crc32);
  CHECK(m.meta("world") == "2");
  CHECK(m.meta("fn") == "emb:encode");
  CHECK(m.header.contains("digest") == f.digest);
  if (f.digest) {
    CHECK(m.tensor("digest") == digests);
    CHECK(m.meta("digest") == "blake2b-128/tarmac-derive-input-1");
    CHECK(m.meta("digest_crc32") == crc_hex(digests));
  }
  CHECK(r.samples == kN);
  CHECK(r.parts == 2);
  CHECK(r.world == 2);
  CHECK(r.bytes == m.file.size());
}

}  // namespace

TEST_CASE("column merge: F32 [3] outputs, scrambled within chunks, in sample order") {
  Fixture f("uniform");
  write_good_parts(f);
  const ColumnMergeResult r = f.merge();
  check_merged(f, r);
  CHECK(r.chunks == 3);
  CHECK(r.dtype == "F32");
  CHECK(r.shape == "[3]");
  const Merged m = read_merged(f);
  CHECK(m.header.at("values").at("dtype") == "F32");
  CHECK(m.header.at("values").at("shape") == nlohmann::json::array({kN, 3}));
  CHECK(r.parts_removed);
  CHECK_FALSE(fs::exists(f.parts));
  // The manifest records the file, so that verify notices it replaced.
  const std::vector<uint8_t> manifest = file_bytes(f.dir / "manifest.json");
  const auto j = nlohmann::json::parse(manifest.begin(), manifest.end());
  CHECK(j.at("columns").at(kColumn).at("values_crc32") == m.meta("values_crc32"));
  CHECK(j.at("columns").at(kColumn).at("size") == m.file.size());
}

TEST_CASE("column merge: ragged U16 outputs with digests, parts kept") {
  Fixture f("ragged");
  f.out = u16_output;
  f.digest = true;
  f.write_part({0, 2, 0, 6, {{{0, 1, 2, 3}, "U16"}, {{5, 4}, "U16"}}});
  f.write_part({1, 2, 6, 12, {{{6, 7, 8}, "U16"}, {{9}, "U16"}, {{11, 10}, "U16"}}});
  const ColumnMergeResult r = f.merge(true);
  check_merged(f, r);
  CHECK(r.chunks == 5);
  CHECK(r.dtype == "U16");
  CHECK(r.shape == "ragged, 1-D");
  CHECK(r.digests);
  const Merged m = read_merged(f);
  CHECK(m.header.at("values").at("shape") == nlohmann::json::array({(1 + 2 + 3) * 4}));
  CHECK_FALSE(r.parts_removed);
  CHECK(fs::is_directory(f.parts));
}

TEST_CASE("column merge refuses a missing part or chunk, naming the rank or the file") {
  SECTION("no record for rank 1") {
    Fixture f("no-part");
    f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}});
    const std::string what = f.refusal<ColumnRefused>();
    CHECK_THAT(what, Contains("column 'emb' is incomplete: 6 of 12 samples have no output"));
    CHECK_THAT(what, Contains("rank 1 of 2: no part at all, samples 6..11"));
  }
  SECTION("a chunk its record lists is gone") {
    Fixture f("no-chunk");
    f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}});
    const fs::path gone = f.write_part({1, 2, 6, 12, {{range_of(6, 9)}, {range_of(9, 12)}}})[1];
    fs::remove(gone);
    CHECK_THAT(f.refusal<FatalError>(), Contains(gone.string()));
  }
  SECTION("a rank's chunks leave samples out") {
    Fixture f("short");
    f.write_part({0, 2, 0, 6, {{{0, 1, 2}}, {{5}}}});
    f.write_part({1, 2, 6, 12, {{range_of(6, 12)}}});
    const std::string what = f.refusal<ColumnRefused>();
    CHECK_THAT(what, Contains("rank 0 of 2: 2 of 6 samples missing, 3..4"));
  }
}

TEST_CASE("column merge refuses a chunk of the wrong size or dtype, naming the file") {
  SECTION("its record says another size") {
    Fixture f("size");
    f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}});
    PartSpec p{1, 2, 6, 12, {{range_of(6, 12)}}};
    p.bytes_off = 8;
    const fs::path chunk = f.write_part(p)[0];
    const auto size = fs::file_size(chunk);
    const std::string what = f.refusal<ParseError>();
    CHECK_THAT(what, Contains(chunk.string() + ": is " + std::to_string(size) +
                              " bytes, its part record says " + std::to_string(size + 8)));
  }
  SECTION("rank 1's outputs are F64, rank 0's F32") {
    Fixture f("dtype");
    const fs::path first = f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}})[0];
    const fs::path odd = f.write_part({1, 2, 6, 12, {{range_of(6, 12), "F64", f64_output}}})[0];
    const std::string what = f.refusal<ColumnRefused>();
    CHECK_THAT(what, Contains(odd.string() + " holds F64 outputs of 1 dimensions, " +
                              first.string() + " holds F32 of 1"));
  }
  SECTION("a byte of a chunk changed after its record was written") {
    Fixture f("crc");
    write_good_parts(f);
    const fs::path chunk = f.parts / "part-00001-of-00002.chunk-000000.safetensors";
    std::vector<uint8_t> b = file_bytes(chunk);
    b.back() ^= 1;  // a value's byte: the structure still holds
    write_bytes(chunk, b);
    const std::string what = f.refusal<ParseError>();
    CHECK_THAT(what, Contains(chunk.string() + ": its CRC-32 is " + crc_hex(b)));
  }
}

TEST_CASE("column merge refuses overlapping or gapped ranges, naming the part") {
  SECTION("rank 0's record reaches into rank 1's share") {
    Fixture f("overlap");
    f.write_part({0, 2, 0, 7, {{range_of(0, 7)}}});
    f.write_part({1, 2, 6, 12, {{range_of(6, 12)}}});
    CHECK_THAT(f.refusal<ColumnRefused>(),
               Contains("part-00000-of-00002.json covers samples 0..7, but rank 0 of 2 "
                        "computes 0..6"));
  }
  SECTION("rank 1's record starts after its share does") {
    Fixture f("gap");
    f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}});
    f.write_part({1, 2, 7, 12, {{range_of(7, 12)}}});
    CHECK_THAT(f.refusal<ColumnRefused>(),
               Contains("part-00001-of-00002.json covers samples 7..12, but rank 1 of 2 "
                        "computes 6..12"));
  }
  SECTION("two chunks hold one sample") {
    Fixture f("twice");
    const std::vector<fs::path> c = f.write_part({0, 2, 0, 6, {{{0, 1, 2, 3}}, {{3, 4, 5}}}});
    f.write_part({1, 2, 6, 12, {{range_of(6, 12)}}});
    CHECK_THAT(f.refusal<ParseError>(),
               Contains(c[1].string() + ": holds sample 3, which " + c[0].string() + " holds too"));
  }
  SECTION("a chunk holds a sample of another rank's share") {
    Fixture f("outside");
    const fs::path c = f.write_part({0, 2, 0, 6, {{{0, 1, 2, 3, 4, 6}}}})[0];
    f.write_part({1, 2, 6, 12, {{range_of(6, 12)}}});
    CHECK_THAT(f.refusal<ParseError>(),
               Contains(c.string() + ": holds sample 6, outside its rank's samples 0..6"));
  }
}

TEST_CASE("column merge refuses a record of another dataset or column, naming the part") {
  SECTION("another annotation file") {
    Fixture f("dataset");
    f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}});
    PartSpec p{1, 2, 6, 12, {{range_of(6, 12)}}};
    p.labels_crc32 = f.labels_crc32 == "0badc0de" ? "0badc0df" : "0badc0de";
    f.write_part(p);
    const std::string what = f.refusal<ColumnRefused>();
    CHECK_THAT(what, Contains("part-00001-of-00002.json was computed from another version of "
                              "the dataset (its annotation file had CRC-32 " +
                              *p.labels_crc32 + " and 12 samples"));
    CHECK_THAT(what, Contains("now has " + f.labels_crc32 + " and 12"));
  }
  SECTION("another column") {
    Fixture f("column");
    f.write_part({0, 2, 0, 6, {{range_of(0, 6)}}});
    PartSpec p{1, 2, 6, 12, {{range_of(6, 12)}}};
    p.column = "lat";
    f.write_part(p);
    CHECK_THAT(f.refusal<ColumnRefused>(),
               Contains("part-00001-of-00002.json is a part of column 'lat', not 'emb'"));
  }
}
