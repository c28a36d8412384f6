#include "format/part_record.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "common/error.h"
#include "support/temp_dir.h"

using namespace tarmac;
using namespace tarmac::format;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// format.md 8's example record, as derive writes it (hand-written here: the layout is the
// contract, not our parser).
// clang-format off
const std::string kRecord =
    R"js({"format": "tarmac-column-part/1", "column": "latents", "rank": 1, "world": 4,
 "begin": 598, "end": 1196,
 "dataset": {"labels_crc32": "1c2b3a49", "num_samples": 2392},
 "fn": "vae_encode:encode", "tool": "tarmac 0.1.0 (python)", "batch_size": 16, "fields": [],
 "fn_version": "v2", "digest": "blake2b-128/tarmac-derive-input-1", "reused": 7,
 "chunks": [{"file": "part-00001-of-00004.chunk-000000.safetensors", "samples": 320,
             "bytes": 5246152, "crc32": "9f0e11d2"}],
 "done": 320, "complete": false})js";
// clang-format on

const fs::path kPath = "ds/columns/latents.parts/part-00001-of-00004.json";

// kRecord with the first `from` replaced by `to` (which must be there).
std::string with(const std::string& from, const std::string& to) {
  std::string s = kRecord;
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("part record: format.md 8's example reads field by field") {
  const PartRecord r = parse_part_record(kRecord, kPath);
  CHECK(r.path == kPath);
  CHECK(r.column == "latents");
  CHECK(r.rank == 1);
  CHECK(r.world == 4);
  CHECK(r.begin == 598);
  CHECK(r.end == 1196);
  CHECK(r.labels_crc32 == "1c2b3a49");
  CHECK(r.num_samples == 2392);
  CHECK(r.fn == "vae_encode:encode");
  CHECK(r.tool == "tarmac 0.1.0 (python)");
  CHECK(r.fn_version == "v2");
  CHECK(r.digest == "blake2b-128/tarmac-derive-input-1");
  CHECK(r.reused == 7);
  REQUIRE(r.chunks.size() == 1);
  CHECK(r.chunks[0].file == "part-00001-of-00004.chunk-000000.safetensors");
  CHECK(r.chunks[0].samples == 320);
  CHECK(r.chunks[0].bytes == 5246152);
  CHECK(r.chunks[0].crc32 == "9f0e11d2");
  CHECK(r.done == 320);
  CHECK_FALSE(r.complete);
}

TEST_CASE("part record: a record from before --reuse (no fn_version, digest, reused) reads") {
  std::string s = with(
      R"("fn_version": "v2", "digest": "blake2b-128/tarmac-derive-input-1", "reused": 7,)", "");
  const PartRecord r = parse_part_record(s, kPath);
  CHECK(r.fn_version.empty());
  CHECK(r.digest.empty());
  CHECK(r.reused == 0);
  CHECK(r.done == 320);
}

TEST_CASE("part record: every refusal names the file and the field") {
  struct Case {
    std::string text, says;
  };
  const Case cases[] = {
      {"not json", "is not JSON"},
      {"[1, 2]", "is not a JSON object"},
      {with("tarmac-column-part/1", "tarmac-column-part/2"),
       "has format \"tarmac-column-part/2\", this tarmac reads \"tarmac-column-part/1\""},
      {with(R"("column": "latents", )", ""), "has no \"column\""},
      {with(R"("rank": 1)", R"("rank": -1)"), "\"rank\" is not a count"},
      // A float is no count: never cast (4.2e47 past uint64 would be undefined behaviour).
      {with(R"("rank": 1)", R"("rank": 4.2e47)"), "\"rank\" is not a count"},
      {with(R"("rank": 1)", R"("rank": 1.0)"), "\"rank\" is not a count"},
      {with(R"("end": 1196)", R"("end": "1196")"), "\"end\" is not a count"},
      {with(R"("dataset": {"labels_crc32": "1c2b3a49", "num_samples": 2392})", R"("dataset": 3)"),
       "\"dataset\" is not an object"},
      {with("1c2b3a49", "1C2B3A49"), "\"dataset.labels_crc32\" is not 8 lowercase hex digits"},
      {with(R"("num_samples": 2392)", R"("num_samples": true)"), "\"num_samples\" is not a count"},
      {with(R"("fn": "vae_encode:encode")", R"("fn": 5)"), "\"fn\" is not a string"},
      {with(R"("reused": 7)", R"("reused": -7)"), "\"reused\" is not a count"},
      {with(R"("chunks": [)", R"("chunks": 5, "x": [)"), "\"chunks\" is not an array"},
      {with(R"("chunks": [{)", R"("chunks": [7, {)"), "a chunk entry is not an object"},
      {with("part-00001-of-00004.chunk-000000.safetensors", "../x.safetensors"),
       "chunk file \"../x.safetensors\" is not a plain name"},
      {with("part-00001-of-00004.chunk-000000.safetensors", ".."),
       "chunk file \"..\" is not a plain name"},
      {with("9f0e11d2", "9f0e11d"), "has a CRC-32 that is not 8 lowercase hex digits"},
      {with(R"("done": 320)", R"("done": null)"), "\"done\" is not a count"},
      {with(R"("complete": false)", R"("complete": 0)"), "\"complete\" is not true or false"},
      {with(R"("world": 4)", R"("world": 0)"), "says rank 1 of world 0"},
      {with(R"("rank": 1)", R"("rank": 4)"), "says rank 4 of world 4"},
      {with(R"("rank": 1)", R"("rank": 2)"), "says rank 2 of 4, which is not what its name says"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CHECK_THROWS_AS(parse_part_record(c.text, kPath), ParseError);
    CHECK_THROWS_WITH(parse_part_record(c.text, kPath),
                      Contains(kPath.string()) && Contains(c.says) && Contains("tarmac column rm"));
  }
}

TEST_CASE("part records: read from a folder, sorted by world then rank, others left alone") {
  const fs::path dir = test::temp_dir("part-record", "folder");
  const auto put = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  std::string r3 = with(R"("rank": 1)", R"("rank": 3)");
  put("part-00003-of-00004.json", r3);
  put("part-00001-of-00004.json", kRecord);
  std::string w2 = with(R"("world": 4)", R"("world": 2)");
  put("part-00001-of-00002.json", w2);
  put("part-00001-of-00004.chunk-000000.safetensors", "not a record");
  put("notes.json", "not a record");
  const std::vector<PartRecord> rs = read_part_records(dir);
  REQUIRE(rs.size() == 3);
  CHECK((rs[0].world == 2 && rs[0].rank == 1));
  CHECK((rs[1].world == 4 && rs[1].rank == 1));
  CHECK((rs[2].world == 4 && rs[2].rank == 3));
  CHECK(rs[2].path == dir / "part-00003-of-00004.json");

  put("part-00002-of-00004.json", "{");
  CHECK_THROWS_WITH(read_part_records(dir),
                    Contains("part-00002-of-00004.json") && Contains("is not JSON"));
  CHECK_THROWS_AS(read_part_record(dir / "part-00000-of-00004.json"), FatalError);
}
