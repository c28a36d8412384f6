#include "format/layout.h"

#include <catch2/catch.hpp>
#include <functional>

#include "common/error.h"

using namespace tarmac;
using Catch::Matchers::Contains;

namespace {

// A header as parse_safetensors returns it, built by hand: the layout reads names, dtypes,
// shapes and metadata only (data offsets are the container's business, checked before).
struct HeaderBuilder {
  SafetensorsHeader h;
  uint64_t at = 0;
  HeaderBuilder& tensor(const std::string& name, DType t, std::vector<int64_t> shape) {
    uint64_t bytes = dtype_size(t);
    for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
    at = (at + 7) / 8 * 8;
    h.tensors.push_back({name, t, std::move(shape), at, at + bytes});
    at += bytes;
    return *this;
  }
  HeaderBuilder& meta(const std::string& k, const std::string& v) {
    h.metadata[k] = v;
    return *this;
  }
};

// Three samples with an image, a dense map, one fixed and one ragged field.
HeaderBuilder three_samples() {
  HeaderBuilder b;
  b.meta("format", "tarmac/1")
      .meta("num_samples", "3")
      .meta("shards", R"(["shard-000000.tar"])")
      .meta("blobs", R"(["__image__","__depth__"])")
      .meta("blob_encodings", R"({"__image__":"jpg","__depth__":"source"})")
      .meta(
          "schema",
          R"({"bbox":{"kind":"numeric","dtype":"F32","shape":[4],"ragged":false,"source":"json"},)"
          R"("pts":{"kind":"numeric","dtype":"I64","shape":[-1,2],"ragged":true,"source":"json"}})")
      .meta("tool", "hand");
  b.tensor("__key__.values", DType::U8, {9}).tensor("__key__.offsets", DType::I64, {4});
  for (const char* kind : {"__image__", "__depth__"})
    for (const auto& c : format::kBlobColumns)
      b.tensor(std::string(kind) + "." + c.suffix, c.dtype, {3});
  b.tensor("__affine__", DType::F64, {3, 2, 3});
  b.tensor("bbox", DType::F32, {3, 4});
  b.tensor("pts.values", DType::I64, {5, 2}).tensor("pts.offsets", DType::I64, {4});
  return b;
}

std::vector<std::string> problems_of(const SafetensorsHeader& h) {
  std::vector<std::string> problems;
  read_layout(h, problems);
  return problems;
}

}  // namespace

TEST_CASE("a complete layout reads the same in both modes") {
  const HeaderBuilder b = three_samples();
  const DatasetLayout l = read_layout(b.h);
  CHECK(l.num_samples == 3);
  CHECK(l.shards == std::vector<std::string>{"shard-000000.tar"});
  REQUIRE(l.blobs.size() == 2);
  CHECK(l.blobs[0].kind == "__image__");
  CHECK(l.blobs[0].encoding == format::StoredEncoding::Jpeg);
  CHECK(l.blobs[1].encoding == format::StoredEncoding::Source);
  CHECK(l.blobs[1].columns[format::kBlobCrc32]->name == "__depth__.crc32");
  REQUIRE(l.fields.size() == 2);
  CHECK(l.fields[0].spec.name == "bbox");
  CHECK(l.fields[0].values->name == "bbox");
  CHECK(l.fields[0].offsets == nullptr);
  CHECK(l.fields[1].values->name == "pts.values");
  CHECK(l.fields[1].offsets->name == "pts.offsets");
  CHECK(l.affine->name == "__affine__");
  CHECK(l.find_field("pts") == &l.fields[1]);
  CHECK(problems_of(b.h).empty());
}

TEST_CASE("files written before blob_encodings still read; their encodings are unknown") {
  HeaderBuilder b = three_samples();
  b.h.metadata.erase("blob_encodings");
  const DatasetLayout l = read_layout(b.h);
  CHECK_FALSE(l.blobs[0].encoding);
  CHECK_FALSE(l.blobs[1].encoding);
}

TEST_CASE("metadata that writes the layout reads back as it was written") {
  LayoutMetadata m;
  m.num_samples = 3;
  m.fields = {{"bbox", FieldKind::Numeric, DType::F32, {4}, false, "json"}};
  m.shards = {"shard-000000.tar"};
  m.blobs = {{"__image__", format::StoredEncoding::Raw}};
  m.tool = "tarmac test";
  auto meta = layout_metadata(m);
  CHECK(meta.at("format") == "tarmac/1");
  CHECK(meta.at("num_samples") == "3");
  CHECK(meta.at("blobs") == R"(["__image__"])");
  CHECK(meta.at("blob_encodings") == R"({"__image__":"rgb"})");
  CHECK(meta.at("tool") == "tarmac test");
  m.blobs.emplace_back("__depth__", std::nullopt);  // merged from an older file
  meta = layout_metadata(m);
  CHECK(meta.at("blobs") == R"(["__image__","__depth__"])");
  CHECK_FALSE(meta.count("blob_encodings"));
}

TEST_CASE("class names (--classes-from-dirs) are written only when set, and read back") {
  LayoutMetadata m;
  m.num_samples = 3;
  m.tool = "tarmac test";
  CHECK_FALSE(layout_metadata(m).count("classes"));
  m.classes = std::vector<std::string>{"Zebra", "a10",
                                       "\xc3\xa9"
                                       "clair"};
  CHECK(layout_metadata(m).at("classes") ==
        "[\"Zebra\",\"a10\",\"\xc3\xa9"
        "clair\"]");

  HeaderBuilder b = three_samples();
  CHECK_FALSE(read_layout(b.h).classes);
  b.meta("classes", layout_metadata(m).at("classes"));
  CHECK(read_layout(b.h).classes == m.classes);
}

TEST_CASE("every problem: the throwing mode names the first, the collecting mode all") {
  struct Case {
    const char* what;
    std::function<void(HeaderBuilder&)> damage;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"other format", [](HeaderBuilder& b) { b.meta("format", "tarmac/2"); }, "'tarmac/2'"},
      {"count not decimal", [](HeaderBuilder& b) { b.meta("num_samples", "3x"); },
       "not a decimal count"},
      {"count too long", [](HeaderBuilder& b) { b.meta("num_samples", "1234567890123456789"); },
       "at most 18 digits"},
      {"no schema", [](HeaderBuilder& b) { b.h.metadata.erase("schema"); }, "'schema' is missing"},
      {"shards not strings", [](HeaderBuilder& b) { b.meta("shards", "[1]"); },
       "not a JSON array of strings"},
      {"shard path", [](HeaderBuilder& b) { b.meta("shards", R"(["../x.tar"])"); },
       "not a plain file name"},
      {"shard twice", [](HeaderBuilder& b) { b.meta("shards", R"(["a.tar","a.tar"])"); },
       "not a plain file name"},
      {"image not first", [](HeaderBuilder& b) { b.meta("blobs", R"(["__depth__","__image__"])"); },
       "not '__image__'"},
      {"unknown encoding",
       [](HeaderBuilder& b) {
         b.meta("blob_encodings", R"({"__image__":"gif","__depth__":"source"})");
       },
       "no known encoding for '__image__'"},
      {"encoding of no blob",
       [](HeaderBuilder& b) {
         b.meta("blob_encodings", R"({"__image__":"jpg","__depth__":"png","__x__":"png"})");
       },
       "names 3 blob kinds"},
      {"classes not strings", [](HeaderBuilder& b) { b.meta("classes", R"(["a",1])"); },
       "'classes' is not a JSON array of strings"},
      {"class twice", [](HeaderBuilder& b) { b.meta("classes", R"(["a","b","a"])"); },
       "names a class twice"},
      {"tensor missing", [](HeaderBuilder& b) { b.h.tensors.pop_back(); },
       "'pts.offsets' is missing"},
      {"wrong dtype",
       [](HeaderBuilder& b) { b.h.tensors[2].dtype = DType::I64; },  // __image__.shard
       "dtype I64, expected I32"},
      {"wrong shape", [](HeaderBuilder& b) { b.h.tensors[1].shape = {3}; },
       "'__key__.offsets' has shape [3], expected [4]"},
      {"unknown tensor", [](HeaderBuilder& b) { b.tensor("extra", DType::U8, {1}); },
       "'extra' is neither"},
      {"unaligned", [](HeaderBuilder& b) { b.h.tensors.back().begin += 1; },
       "not aligned to its element size"},
      {"too many dims",
       [](HeaderBuilder& b) {
         b.tensor("deep", DType::U8, {1, 1, 1, 1, 1, 1, 1, 1, 1});
       },
       "more than the 8"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    HeaderBuilder b = three_samples();
    c.damage(b);
    CHECK_THROWS_AS(read_layout(b.h), ParseError);
    CHECK_THROWS_WITH(read_layout(b.h), Contains("labels.safetensors: ") && Contains(c.message));
    const auto problems = problems_of(b.h);
    REQUIRE_FALSE(problems.empty());
    bool named = false;
    for (const auto& p : problems) named = named || p.find(c.message) != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("the collecting mode goes on past a problem, and says when nothing is usable") {
  HeaderBuilder b = three_samples();
  b.meta("format", "tarmac/9");
  b.tensor("extra", DType::U8, {1});
  std::vector<std::string> problems;
  const auto l = read_layout(b.h, problems);
  REQUIRE(l);
  CHECK(problems.size() == 2);
  CHECK(l->fields.size() == 2);

  HeaderBuilder keyless = three_samples();
  keyless.h.tensors.erase(keyless.h.tensors.begin());
  problems.clear();
  CHECK_FALSE(read_layout(keyless.h, problems));
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Contains("'__key__.values' is missing"));
}
