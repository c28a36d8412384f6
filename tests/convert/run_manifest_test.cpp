#include "convert/run_manifest.h"

#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "convert/stage_specs.h"
#include "format/manifest.h"
#include "support/temp_dir.h"

using namespace tarmac;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

fs::path manifest_dir(const std::string& name) {
  return test::temp_dir("run-manifest", name);
}

// The oracle: zlib's CRC-32 of the whole file, as 8 lower-case hex digits.
std::string zlib_file_crc(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  const std::vector<char> b{std::istreambuf_iterator<char>(f), {}};
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx",
                ::crc32_z(0, reinterpret_cast<const Bytef*>(b.data()), b.size()));
  return hex;
}

// Sample k: a 300-byte "image" and an I64 `id` = k.
ProcessedSample manifest_sample(int k) {
  ProcessedSample s;
  s.key = "s" + std::to_string(k);
  s.image.member_suffix = "jpg";
  s.image.bytes.assign(300, static_cast<uint8_t>(k));
  s.image.width = 4;
  s.image.height = 3;
  s.image.crc32 = static_cast<uint32_t>(k);
  SampleField id{"id", s.key + ".json", "json", {}};
  id.value.dtype = DType::I64;
  const int64_t v = k;
  id.value.data.resize(8);
  std::memcpy(id.value.data.data(), &v, 8);
  s.fields = {id};
  return s;
}

}  // namespace

TEST_CASE("run_manifest: what the run knows, every key, each count its list's") {
  const fs::path dir = manifest_dir("full");
  ConvertOptions o;
  o.limits.shard_size = 1024;  // 300-byte images (1 KiB in the tar): a shard or more per sample
  o.source.inputs = {"a.tar", "b.tar", "c.tar"};
  o.part.index = 1;
  o.part.count = 2;
  o.provenance.command_line = {"tarmac", "convert", "a.tar", "b.tar", "c.tar", "-o", "out"};
  o.provenance.options_json = R"({"inputs": "a.tar b.tar c.tar", "threads": 2})";
  DatasetWriter w(writer_spec(o), dir, nullptr);
  for (int k = 0; k < 3; ++k) {
    ProcessedSample s = manifest_sample(k);
    w.add(s);
  }
  const fs::path labels = w.finish("tarmac test");
  const size_t shards = w.shard_names().size();
  REQUIRE(shards >= 2);

  std::vector<InputInfo> inputs(2);
  inputs[0].path = "b.tar";
  inputs[0].bytes_read = 7168;
  inputs[0].crc32 = 0x04054333;
  inputs[0].members = 6;
  inputs[1].path = "c.tar";
  inputs[1].bytes_read = 10;
  inputs[1].crc32 = 0xab;
  inputs[1].error = "truncated";
  ConvertResult res;
  res.samples = 3;
  res.shards = shards;
  res.image_bytes = 900;
  res.annotation_bytes = fs::file_size(labels);
  res.skipped_samples = 1;
  res.error_members = 0;
  res.ignored_members = 1;
  res.duplicates = 0;
  res.input_errors = {"c.tar: truncated"};
  res.resumed_samples = 2;
  const json skipped = json::parse(R"([
      {"input": "b.tar", "sample": "x", "code": "bad_image", "reason": "r"},
      {"input": "c.tar", "archive": "c.tar", "code": "input_error", "reason": "truncated"}])");
  const json ignored =
      json::parse(R"([{"input": "b.tar", "member": ".h", "code": "hidden_file", "reason": "r"}])");
  const ManifestSpec spec = manifest_spec(o);
  const ManifestRecord rec{spec, PartSplit::Inputs, inputs, 5, res, w, dir, labels};
  const auto entries = [](const json& list) {
    std::vector<format::ProvenanceEntry> v;
    for (const auto& e : list) v.push_back(format::parse_provenance_entry(e, "entry"));
    return v;
  };
  const format::Manifest m = run_manifest(rec, entries(skipped), entries(ignored), {});

  CHECK(m.tool_name == "tarmac");
  CHECK(m.command_line == o.provenance.command_line);
  CHECK(m.options == json{{"inputs", "a.tar b.tar c.tar"}, {"threads", 2}});
  REQUIRE(m.output_options);
  CHECK(m.output_options->is_object());
  REQUIRE(m.inputs.size() == 2);
  CHECK(m.inputs[0] ==
        json{{"path", "b.tar"}, {"size", 7168}, {"crc32", "04054333"}, {"members", 6}});
  CHECK(m.inputs[1]["crc32"] == "000000ab");
  CHECK(m.inputs[1]["error"] == "truncated");
  CHECK(!m.table);
  CHECK(*m.resumed == format::ManifestResumed{5, 2});
  CHECK(*m.part == format::ManifestPart{1, 2, "inputs", 3});
  // The shards as the disk has them: sizes by stat, CRC-32s by zlib.
  REQUIRE(m.shards->size() == shards);
  for (size_t i = 0; i < shards; ++i) {
    const fs::path shard = dir / w.shard_names()[i];
    CHECK((*m.shards)[i].name == w.shard_names()[i]);
    CHECK((*m.shards)[i].size == fs::file_size(shard));
    CHECK((*m.shards)[i].crc32 == zlib_file_crc(shard));
  }
  CHECK(*m.labels_crc32 == zlib_file_crc(labels));
  CHECK(*m.annotation == format::ManifestAnnotation{"labels.safetensors", fs::file_size(labels)});
  CHECK(m.counts == format::ManifestCounts{3, 1, 0, 1, 0, 0, 0, 0, 1, shards, 900});
  CHECK(m.schema.contains("id"));
  CHECK(format::to_json(m).at("skipped") == skipped);
  CHECK(format::to_json(m).at("ignored") == ignored);
  CHECK(m.duplicates.empty());
  REQUIRE(m.columns);
  CHECK(m.columns->empty());  // written empty: `column merge` adds to it
  CHECK(!m.shard_list);       // convert adds it once the shard list is written
  CHECK(format::count_problems(m).empty());

  // The sealed text parses back to the same manifest, and its seal is good.
  const std::string text = format::sealed_manifest_text(m);
  CHECK(format::check_seal(text).state == format::ManifestSeal::State::Good);
  CHECK(format::to_json(format::parse_manifest(text)) == format::to_json(m));
}

TEST_CASE(
    "run_manifest: no part, no resume; counts that disagree with the lists are never sealed") {
  const fs::path dir = manifest_dir("plain");
  ConvertOptions o;
  DatasetWriter w(writer_spec(o), dir, nullptr);
  ProcessedSample s = manifest_sample(0);
  w.add(s);
  const fs::path labels = w.finish("tarmac test");
  ConvertResult res;
  res.samples = 1;
  res.shards = 1;
  res.image_bytes = 300;
  res.duplicates = 1;  // but no entry in the duplicates list
  const std::vector<InputInfo> inputs;
  const ManifestSpec spec = manifest_spec(o);
  const ManifestRecord rec{spec, PartSplit::None, inputs, std::nullopt, res, w, dir, labels};
  const format::Manifest m = run_manifest(rec, {}, {}, {});
  CHECK(!m.part);
  CHECK(!m.resumed);
  CHECK(m.options == json::object());
  CHECK(m.inputs == json::array());
  REQUIRE(format::count_problems(m).size() == 1);
  CHECK_THROWS_AS(format::sealed_manifest_text(m), tarmac::InternalError);
}
