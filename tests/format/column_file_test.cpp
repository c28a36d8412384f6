#include "format/column_file.h"

#include <catch2/catch.hpp>

#include "common/error.h"

using namespace tarmac;
using namespace tarmac::format;

TEST_CASE("column names: what the reader can put beside the fields") {
  for (const char* ok : {"latents", "vae-f16", "clip.L14", "a", "Z_9"})
    CHECK(is_valid_column_name(ok));
  for (const char* bad : {"", "_x", "__key__", ".hidden", "a/b", "a b", "é"})
    CHECK_FALSE(is_valid_column_name(bad));
  CHECK_FALSE(is_valid_column_name(std::string(129, 'a')));
  CHECK(is_valid_column_name(std::string(128, 'a')));
}

TEST_CASE("column names: the whole name is held to the rule, first character a letter or digit") {
  // A name that merely starts well is refused: a pattern with `$` once let "nl\n" through.
  for (const char* bad : {"nl\n", "a\n", "a\t", "a\r", "latents\x1b[2J", "-x", "-", "9-\n"})
    CHECK_FALSE(is_valid_column_name(bad));
  CHECK_FALSE(is_valid_column_name(std::string_view("a\0b", 3)));
  for (const char* ok : {"9", "a-", "a.", "a_", "x.y-z_0"}) CHECK(is_valid_column_name(ok));
  CHECK(column_file("latents") == "columns/latents.safetensors");
  CHECK(column_parts_dir("latents") == "columns/latents.parts");
  CHECK(part_record_name(3, 8) == "part-00003-of-00008.json");
}

TEST_CASE("rank shares: floor(r n / w), disjoint, covering, as Python's r * n // w") {
  for (uint64_t n : {0ull, 1ull, 7ull, 2392ull, 1000003ull})
    for (uint64_t w : {1ull, 2ull, 3ull, 4ull, 7ull, 64ull}) {
      uint64_t next = 0;
      for (uint64_t r = 0; r < w; ++r) {
        const SampleRange s = rank_share(n, r, w);
        CHECK(s.begin == next);
        CHECK(s.begin == r * n / w);  // no overflow at these sizes
        CHECK(s.end - s.begin <= n / w + 1);
        next = s.end;
      }
      CHECK(next == n);
    }
  // Large n: exact where r * n would overflow 64 bits.
  const uint64_t big = (1ull << 62) + 12345;
  CHECK(rank_share(big, 3, 7).begin == 1976436865040314392ull);  // Python: 3 * (2**62 + 12345) // 7
  CHECK_THROWS_AS(rank_share(10, 2, 2), ArgumentError);
  CHECK_THROWS_AS(rank_share(10, 0, 0), ArgumentError);
}

namespace {

SafetensorsHeader header(int64_t n, std::vector<int64_t> values_shape, int64_t d,
                         std::map<std::string, std::string> meta = {}) {
  SafetensorsHeader h;
  std::map<std::string, std::string> m{{"format", "tarmac-column/1"},
                                       {"column", "latents"},
                                       {"num_samples", std::to_string(n)},
                                       {"world", "2"},
                                       {"labels_crc32", "0123abcd"},
                                       {"fn", "m:f"},
                                       {"tool", "t"},
                                       {"values_crc32", "00000000"},
                                       {"offsets_crc32", "00000000"},
                                       {"shapes_crc32", "00000000"}};
  for (auto& [k, v] : meta) m[k] = v;
  h.metadata = m;
  int64_t elements = 1;
  for (int64_t x : values_shape) elements *= x;
  uint64_t at = 8;
  auto add = [&](const char* name, DType t, std::vector<int64_t> shape, uint64_t bytes) {
    h.tensors.push_back({name, t, std::move(shape), at, at + bytes});
    at += bytes;
  };
  add("offsets", DType::I64, {n + 1}, static_cast<uint64_t>(8 * (n + 1)));
  add("shapes", DType::I64, {n, d}, static_cast<uint64_t>(8 * n * d));
  add("values", DType::F32, values_shape, static_cast<uint64_t>(4 * elements));
  return h;
}

}  // namespace

TEST_CASE("column layout: one shape as [N, ...], several as flat [E]") {
  const ColumnLayout u = read_column_layout(header(5, {5, 4, 8, 8}, 3));
  REQUIRE(u.uniform_shape);
  CHECK(*u.uniform_shape == std::vector<int64_t>{4, 8, 8});
  CHECK(u.ndim == 3);
  CHECK(u.dtype == DType::F32);
  CHECK(u.labels_crc32 == "0123abcd");
  CHECK(u.world == 2);
  const ColumnLayout r = read_column_layout(header(5, {700}, 3));
  CHECK_FALSE(r.uniform_shape);
  CHECK(read_column_layout(header(5, {5}, 0)).uniform_shape);  // a scalar per sample
}

TEST_CASE("column layout: what is refused, with the reason") {
  auto refuses = [](const SafetensorsHeader& h, const std::string& part) {
    try {
      read_column_layout(h);
      FAIL("accepted");
    } catch (const ParseError& e) {
      CHECK_THAT(e.what(), Catch::Contains(part));
    }
  };
  refuses(header(5, {5, 4}, 1, {{"format", "tarmac/1"}}), "format is 'tarmac/1'");
  refuses(header(5, {5, 4}, 1, {{"labels_crc32", "XYZ"}}), "CRC-32");
  refuses(header(5, {5, 4}, 1, {{"num_samples", "-1"}}), "num_samples");
  refuses(header(5, {5, 4}, 1, {{"column", "__key__"}}), "not a valid name");
  refuses(header(5, {5, 4, 2}, 9), "shapes");
  refuses(header(5, {6, 4, 2}, 1), "'values' is [6, 4, 2]");
  SafetensorsHeader h = header(5, {5, 4}, 1);
  h.metadata.erase("fn");
  refuses(h, "no 'fn'");
  h = header(5, {5, 4}, 1);
  h.tensors[0].shape = {5};
  refuses(h, "'offsets' is I64 [5]");
}

TEST_CASE("column layout: the optional input digests, U8 [N, 16] with their CRC-32") {
  CHECK(read_column_layout(header(5, {5, 4}, 1)).digest == nullptr);  // a column from before
  SafetensorsHeader h = header(5, {5, 4}, 1, {{"digest_crc32", "89abcdef"}});
  const uint64_t at = h.tensors.back().end;
  h.tensors.push_back({"digest", DType::U8, {5, 16}, at, at + 80});
  const ColumnLayout l = read_column_layout(h);
  REQUIRE(l.digest != nullptr);
  CHECK(l.digest->shape == std::vector<int64_t>{5, 16});
  CHECK(l.digest_crc32 == "89abcdef");
  auto refuses = [](const SafetensorsHeader& bad, const std::string& part) {
    try {
      read_column_layout(bad);
      FAIL("accepted");
    } catch (const ParseError& e) {
      CHECK_THAT(e.what(), Catch::Contains(part));
    }
  };
  SafetensorsHeader wrong = h;
  wrong.tensors.back().shape = {5, 32};
  refuses(wrong, "'digest' is U8 [5, 32], expected U8 [5, 16]");
  wrong = h;
  wrong.tensors.back().dtype = DType::I8;
  refuses(wrong, "'digest' is I8");
  wrong = h;
  wrong.metadata.erase("digest_crc32");
  refuses(wrong, "no 'digest_crc32'");
  wrong = h;
  wrong.tensors.back().name = "extra";
  refuses(wrong, "it holds 4 tensors");
}

TEST_CASE("column files: what an entry of columns/ is, by its whole name") {
  std::string name;
  CHECK(column_entry("depth.safetensors", &name) == ColumnEntry::Merged);
  CHECK(name == "depth");
  CHECK(column_entry("emb.v2.parts", &name) == ColumnEntry::Parts);
  CHECK(name == "emb.v2");
  CHECK(column_entry(".depth.safetensors.partial") == ColumnEntry::Partial);
  CHECK(column_entry(".safetensors") == ColumnEntry::None);      // no name
  CHECK(column_entry("__x.safetensors") == ColumnEntry::None);   // the format's own names
  CHECK(column_entry("depth.safetensor") == ColumnEntry::None);  // another suffix
  CHECK(column_entry("notes.txt") == ColumnEntry::None);
  CHECK(column_partial_file("depth") == "columns/.depth.safetensors.partial");
  CHECK(column_file("depth") == "columns/depth.safetensors");
  CHECK(column_parts_dir("depth") == "columns/depth.parts");
}
