#include "convert/run_report.h"

#include <catch2/catch.hpp>

using namespace tarmac;

namespace {

// A stage's (seconds, waiting) for a busy fraction of 1 - waiting / seconds.
StageTimes times(double reader_busy, double worker_busy, double writer_busy) {
  StageTimes st;
  st.threads = 4;
  st.reader_seconds = 10;
  st.reader_blocked_seconds = 10 * (1 - reader_busy);
  st.worker_seconds = 40;
  st.worker_idle_seconds = 40 * (1 - worker_busy);
  st.writer_seconds = 10;
  st.writer_idle_seconds = 10 * (1 - writer_busy);
  st.ahead_samples = 100;
  st.first_release_seconds = 0.1;
  return st;
}

}  // namespace

TEST_CASE("stage_limit: the stage at 85 % busy or more") {
  CHECK(stage_limit(times(0.3, 0.95, 0.2)) == StageLimit::Workers);
  CHECK(stage_limit(times(0.99, 0.25, 0.1)) == StageLimit::Reader);
  CHECK(stage_limit(times(0.2, 0.3, 0.95)) == StageLimit::Writer);
  CHECK(stage_limit(times(0.5, 0.5, 0.5)) == StageLimit::None);
  CHECK(stage_limit(StageTimes{}) == StageLimit::None);  // nothing measured (e.g. a resume)
}

TEST_CASE("stage_limit: between two busy stages") {
  // Workers and reader both busy: the busier one.
  CHECK(stage_limit(times(0.9, 0.95, 0.1)) == StageLimit::Workers);
  CHECK(stage_limit(times(0.95, 0.9, 0.1)) == StageLimit::Reader);
  // Reader and writer both busy: the reader unless the writer is busier.
  CHECK(stage_limit(times(0.95, 0.1, 0.9)) == StageLimit::Reader);
  CHECK(stage_limit(times(0.9, 0.1, 0.95)) == StageLimit::Writer);
}

TEST_CASE("stage_limit: a busy reader whose samples waited in the group window") {
  StageTimes st = times(1.0, 0.1, 0.1);
  st.ahead_samples = 0;
  st.first_release_seconds = 8;  // of the reader's 10 s
  CHECK(stage_limit(st) == StageLimit::Window);
  st.first_release_seconds = 5;  // half of them still counts
  CHECK(stage_limit(st) == StageLimit::Window);
  st.first_release_seconds = 4.9;  // the workers started early enough: reading is the limit
  CHECK(stage_limit(st) == StageLimit::Reader);
  st.first_release_seconds = 8;
  st.ahead_samples = 1;  // some were converted ahead while the window filled
  CHECK(stage_limit(st) == StageLimit::Reader);
}

TEST_CASE("stage_limit_name: the JSON summary's `limit`") {
  CHECK(std::string(stage_limit_name(StageLimit::Workers)) == "workers");
  CHECK(std::string(stage_limit_name(StageLimit::Window)) == "window");
  CHECK(std::string(stage_limit_name(StageLimit::Reader)) == "reader");
  CHECK(std::string(stage_limit_name(StageLimit::Writer)) == "writer");
  CHECK(std::string(stage_limit_name(StageLimit::None)) == "");
}

TEST_CASE("stage_advice: what limits the run and what would help") {
  CHECK(stage_advice(times(0.3, 0.95, 0.2)) ==
        "the limit: the transform workers (decoding, cropping, encoding); more --threads help "
        "while cores are free");
  StageTimes reader = times(0.99, 0.25, 0.1);
  reader.input_compression = "gzip";
  CHECK(stage_advice(reader) ==
        "the limit: reading the input (one thread reads, decompresses and checksums it); more "
        "--threads will not help: split the input into parts (--shard I/N, one process each) "
        "or store it as .tar or .tar.zst instead of .tar.gz");
  CHECK(stage_advice(times(0.2, 0.3, 0.95)) ==
        "the limit: writing the output (labels and shards, in order); check the output disk's "
        "speed");
  StageTimes window = times(1.0, 0.1, 0.1);
  window.ahead_samples = 0;
  window.first_release_seconds = 7.456;
  window.members_interleaved = true;
  CHECK(stage_advice(window) ==
        "the limit: the group window; the workers waited 7.46 s for their first samples, which "
        "are held until --group-window bytes are waiting and could not be converted ahead "
        "(their members are not adjacent), so a run whose input is not much larger than the "
        "window is bound by reading it; sort the members by name (tar --sort=name) to have "
        "them converted while the window fills");
  CHECK(stage_advice(times(0.5, 0.5, 0.5)).empty());
}

// Issue #25, 16g: the advice told a plain .tar's reader to store it as .tar, and an already
// sorted tar's to sort its members.
TEST_CASE("stage_advice: the advice matches the input") {
  StageTimes reader = times(0.99, 0.25, 0.1);
  const std::string split =
      "the limit: reading the input (one thread reads, decompresses and checksums it); more "
      "--threads will not help: split the input into parts (--shard I/N, one process each)";
  CHECK(stage_advice(reader) == split);  // a .tar: nothing to change in how it is stored
  reader.input_compression = "zstd";
  CHECK(stage_advice(reader) == split);
  reader.input_compression = "xz";
  CHECK(stage_advice(reader) == split + " or store it as .tar or .tar.zst instead of xz");

  StageTimes window = times(1.0, 0.1, 0.1);
  window.ahead_samples = 0;
  window.first_release_seconds = 7.456;
  window.members_interleaved = false;  // sorted already: samples too small to go ahead
  const std::string advice = stage_advice(window);
  CHECK(advice.find("sort") == std::string::npos);
  CHECK(advice.find("not adjacent") == std::string::npos);
  CHECK(advice.find("a smaller --group-window") != std::string::npos);
}

TEST_CASE("skip_advice: --no-images only when every sample was skipped for want of an image") {
  ConvertResult r;
  CHECK(skip_advice(r).empty());  // nothing skipped
  r.skipped_samples = r.no_image_samples = 3;
  CHECK(skip_advice(r) ==
        "every sample was skipped for want of an image member: if the input has no images at "
        "all, pass --no-images");
  r.samples = 1;  // one sample had an image
  CHECK(skip_advice(r).empty());
  r.samples = 0;
  r.skipped_samples = 4;  // one was skipped for another reason
  CHECK(skip_advice(r).empty());
}

TEST_CASE("result_json: the document convert --json prints, key for key, in order") {
  ConvertResult r;
  r.samples = 10;
  r.resumed_samples = 2;
  r.skipped_samples = 1;
  r.error_members = 3;
  r.ignored_members = 4;
  r.duplicates = 5;
  r.duplicate_content_samples = 11;
  r.shards = 6;
  r.image_bytes = 7000;
  r.annotation_bytes = 800;
  r.input_bytes = 9000;
  r.remote_retries = 2;
  r.remote_resumed_bytes = 300;
  r.seconds = 2;
  r.schema = {{"bbox", FieldKind::Numeric, DType::F32, {4}, false, "json"},
              {"kp", FieldKind::Numeric, DType::F64, {-1, 2}, true, "npz"},
              {"caption", FieldKind::String, DType::U8, {}, false, "txt"}};
  r.input_errors = {"'b.tar': truncated"};
  r.skipped = {{"a.tar", "k/1", "no_image", "no image"}};  // the summary's, not the JSON's
  StageTimes& st = r.stages;
  st.threads = 2;
  st.reader_seconds = 4;
  st.reader_blocked_seconds = 1;
  st.worker_seconds = 8;
  st.worker_idle_seconds = 0.5;
  st.writer_seconds = 4;
  st.writer_idle_seconds = 2;
  st.finish_seconds = 0.25;
  st.first_release_seconds = 0.5;
  st.ahead_samples = 3;
  CHECK(result_json(r, "out/").dump() ==
        R"({"output":"out/","samples":10,"resumed_samples":2,"skipped_samples":1,)"
        R"("skipped_members":3,"ignored_members":4,"duplicates":5,)"
        R"("duplicate_content_samples":11,"shards":6,)"
        R"("image_bytes":7000,"annotation_bytes":800,"input_bytes":9000,)"
        R"("remote_retries":2,"remote_resumed_bytes":300,"seconds":2.0,)"
        R"("samples_per_second":4.0,"schema":{)"  // 8 converted by this run (2 resumed) in 2 s
        R"("bbox":{"kind":"numeric","dtype":"F32","shape":[4],"ragged":false,"source":"json"},)"
        R"("kp":{"kind":"numeric","dtype":"F64","shape":[-1,2],"ragged":true,"source":"npz"},)"
        R"("caption":{"kind":"string","dtype":"U8","shape":[],"ragged":false,"source":"txt"}},)"
        R"("missing_values":{},"field_warnings":[],)"
        R"("input_errors":["'b.tar': truncated"],"notes":[],)"
        R"("stages":{"threads":2,"reader_seconds":4.0,"reader_blocked_seconds":1.0,)"
        R"("worker_seconds":8.0,"worker_idle_seconds":0.5,"writer_seconds":4.0,)"
        R"("writer_idle_seconds":2.0,"finish_seconds":0.25,"first_release_seconds":0.5,)"
        R"("ahead_samples":3,"reader_busy":0.75,"worker_busy":0.9375,"writer_busy":0.5,)"
        R"("limit":"workers"}})");
}

TEST_CASE("result_json: an empty run has an empty schema object and no limit") {
  const auto j = result_json(ConvertResult{}, "o");
  CHECK(j.at("schema").is_object());
  CHECK(j.at("schema").empty());
  CHECK(j.at("input_errors").is_array());
  CHECK(j.at("samples_per_second") == 0);
  CHECK(j.at("stages").at("limit") == "");
  CHECK(j.at("stages").at("reader_busy") == 0.0);
}

TEST_CASE("empty_run_reason: why a run converted no sample") {
  ConvertOptions o;
  ConvertResult r;
  CHECK(empty_run_reason(r, 0, o.members.on_duplicate, o.dedup, o.part) ==
        "the input holds no member (an empty archive, directory or standard input)");
  CHECK(empty_run_reason(r, 4, o.members.on_duplicate, o.dedup, o.part) ==
        "none of the input's 4 member(s) made a sample");
  r.skipped_samples = 2;
  r.no_image_samples = 2;
  r.skipped = {{"a.tar", "k/1", "no_image", "sample has no image member"}};
  CHECK(empty_run_reason(r, 4, o.members.on_duplicate, o.dedup, o.part) ==
        "all 2 sample(s) were skipped as bad (the first: 'a.tar', sample 'k/1': sample has no "
        "image member); every sample was skipped for want of an image member: if the input has "
        "no images at all, pass --no-images");
  r = ConvertResult{};
  r.duplicates = 3;
  o.members.on_duplicate = OnDuplicate::First;
  CHECK(empty_run_reason(r, 6, o.members.on_duplicate, o.dedup, o.part) ==
        "every sample was left out as a duplicate (--on-duplicate first)");
  r = ConvertResult{};
  o.part.index = 5;
  o.part.count = 8;
  CHECK(empty_run_reason(r, 6, o.members.on_duplicate, o.dedup, o.part) ==
        "part 5/8 of the input holds no sample");
}
