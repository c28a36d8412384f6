#include "convert/checkpoint.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "common/error.h"
#include "convert/fingerprint.h"
#include "convert/output_folder.h"
#include "table/table.h"

using namespace tarmac;
using Catch::Matchers::Contains;
using json = nlohmann::ordered_json;

namespace {

ConvertOptions base() {
  ConvertOptions o;
  o.source.inputs = {"/nonexistent/a.tar"};
  o.output = "/nonexistent/out";
  o.transform.geometry.crop = CropMode::Field;
  o.transform.crop_field = "bbox";
  o.transform.geometry.crop_scale = 1.2;
  o.transform.geometry.width = o.transform.geometry.height = 224;
  o.transform.geometry.resize = ResizeMode::Exact;
  return o;
}

// A checkpoint of a run with options `then`, as the converter writes it (the parts
// check_resumable reads before it refuses).
format::Checkpoint checkpoint_of(const ConvertOptions& then) {
  format::Checkpoint c;
  c.run = run_fingerprint(then, then.source.inputs);
  return c;
}

}  // namespace

TEST_CASE("the options that shape the output are typed and named after their flags") {
  const json j = output_options(base());
  CHECK(j["--crop"] == json({{"mode", "field"}, {"field", "bbox:xywh"}}));
  CHECK(j["--size"] == json({224, 224}));
  CHECK(j["--crop-scale"] == 1.2);
  CHECK(j["--format"] == "jpg");
  CHECK(j["--channels"] == "3");
  CHECK(j["--on-error"] == "fail");
  CHECK(j["--key-rule"] == "first-dot");
  CHECK_FALSE(j.contains("--threads"));
  CHECK_FALSE(j.contains("--output"));
}

TEST_CASE("a library caller resuming with other crop options is refused, naming the option") {
  // The hazard this guards: the fingerprint once came from a JSON string only the CLI filled,
  // so a library caller could resume with another crop and get a mixed dataset.
  const std::filesystem::path staging = "/nonexistent/out/.tarmac-partial";
  ConvertOptions now = base();
  now.transform.crop_field_xyxy = true;
  CHECK_THROWS_WITH(
      check_resumable(checkpoint_of(base()), run_fingerprint(now, now.source.inputs), staging),
      Contains("cannot resume") && Contains("--crop") && Contains("bbox:xyxy"));
  now = base();
  now.transform.geometry.crop_scale = 1.25;
  CHECK_THROWS_WITH(
      check_resumable(checkpoint_of(base()), run_fingerprint(now, now.source.inputs), staging),
      Contains("--crop-scale"));
  now = base();
  now.transform.channels = ChannelMode::Keep;
  CHECK_THROWS_WITH(
      check_resumable(checkpoint_of(base()), run_fingerprint(now, now.source.inputs), staging),
      Contains("--channels"));
  now = base();
  now.members.key_rule = KeyRule::LastDot;  // other keys: other samples
  CHECK_THROWS_WITH(
      check_resumable(checkpoint_of(base()), run_fingerprint(now, now.source.inputs), staging),
      Contains("--key-rule") && Contains("last-dot"));
  now = base();
  now.part.index = 1;
  now.part.count = 2;
  CHECK_THROWS_WITH(
      check_resumable(checkpoint_of(base()), run_fingerprint(now, now.source.inputs), staging),
      Contains("--shard differs"));
}

TEST_CASE("a resume whose class folders differ is refused (--classes-from-dirs)") {
  // A directory input's fingerprint is its path: a class folder added since would shift ids.
  const std::filesystem::path staging = "/nonexistent/out/.tarmac-partial";
  ConvertOptions then = base();
  then.labels.classes_from_dirs = true;
  then.labels.classes = {"cat", "dog"};
  CHECK(output_options(then)["--classes-from-dirs"] == true);
  ConvertOptions now = then;
  CHECK_NOTHROW(
      check_resumable(checkpoint_of(then), run_fingerprint(now, now.source.inputs), staging));
  now.labels.classes = {"ant", "cat", "dog"};
  CHECK_THROWS_WITH(
      check_resumable(checkpoint_of(then), run_fingerprint(now, now.source.inputs), staging),
      Contains("class folders") && Contains("2 then, 3 now"));
}

TEST_CASE("what does not shape the output may change between a run and its resume") {
  ConvertOptions now = base();
  now.run.threads = 7;
  now.run.overwrite = true;
  now.run.checkpoint_seconds = 1;
  now.provenance.command_line = {"tarmac", "convert", "--whatever"};
  now.provenance.options_json = R"({"--threads": 7})";
  CHECK(run_fingerprint(now, now.source.inputs) == run_fingerprint(base(), base().source.inputs));
}

TEST_CASE("a remote or pipe: table is known to a resume by its size and CRC-32") {
  // It has no modification time: the bytes read are its identity.
  const std::filesystem::path staging = "/nonexistent/out/.tarmac-partial";
  for (const char* path : {"s3://bucket/tables/t.csv", "https://host/t.jsonl", "pipe:cat t.csv"}) {
    ConvertOptions o = base();
    o.table.path = path;
    Table then;
    then.bytes = 1000;
    then.crc32 = 0x1234abcd;
    format::Checkpoint cp;
    cp.run = run_fingerprint(o, o.source.inputs, &then);
    CHECK(cp.run["table"] == json({{"path", path}, {"size", 1000}, {"crc32", 0x1234abcd}}));
    Table now = then;
    CHECK_NOTHROW(check_resumable(cp, run_fingerprint(o, o.source.inputs, &now), staging));
    now.crc32 ^= 1;
    CHECK_THROWS_WITH(check_resumable(cp, run_fingerprint(o, o.source.inputs, &now), staging),
                      Contains(std::string("the table '") + path + "' is not the same") &&
                          Contains("its size or CRC-32 differ"));
  }
  // a local table keeps its file identity (path, size, modification time)
  ConvertOptions o = base();
  o.table.path = "/nonexistent/t.csv";
  Table t;
  t.crc32 = 7;
  CHECK(run_fingerprint(o, o.source.inputs, &t)["table"] == json({{"path", "/nonexistent/t.csv"}}));
}
