#include "apps/progress.h"

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

using namespace tarmac::cli;

namespace {

ProgressSnapshot converting(uint64_t handled, uint64_t seen, uint64_t bytes, uint64_t total) {
  ProgressSnapshot s;
  s.phase = "converting";
  s.counts_samples = true;
  s.samples = s.handled = handled;
  s.seen = seen;
  s.bytes_read = bytes;
  s.total_bytes = total;
  return s;
}

}  // namespace

TEST_CASE("progress_mode: auto is a bar on a terminal, plain lines in a log; -q draws none") {
  CHECK(progress_mode("auto", false, true) == ProgressMode::Bar);
  CHECK(progress_mode("auto", false, false) == ProgressMode::Plain);
  CHECK(progress_mode("bar", false, false) == ProgressMode::Bar);
  CHECK(progress_mode("plain", false, true) == ProgressMode::Plain);
  CHECK(progress_mode("none", false, true) == ProgressMode::None);
  CHECK(progress_mode("auto", true, true) == ProgressMode::None);
  CHECK(progress_mode("plain", true, false) == ProgressMode::None);
  CHECK_THROWS_AS(progress_mode("fancy", false, true), CLI::ValidationError);
}

TEST_CASE("estimate: every byte read is not 100 %: 305 of 400 samples done is 76 %") {
  // The input is read to its end (the group window holds the rest), the work is not.
  ProgressSnapshot s = converting(305, 400, 1000, 1000);
  s.input_done = true;
  const ProgressEstimate e = estimate(s, 10.0, 0);
  REQUIRE(e.fraction);
  CHECK(*e.fraction == Approx(305.0 / 400));
  CHECK(*e.expected == 400);
  CHECK(e.samples_per_second == Approx(30.5));
  REQUIRE(e.eta_seconds);
  CHECK(*e.eta_seconds == Approx(95 / 30.5));
}

TEST_CASE("estimate: expected samples from samples met per byte read") {
  // 100 samples met in 250 of 1000 bytes: ~400 in all; 50 handled in 5 s: 350 more at 10/s.
  const ProgressEstimate e = estimate(converting(50, 100, 250, 1000), 5.0, 0);
  REQUIRE(e.expected);
  CHECK(*e.expected == 400);
  CHECK(*e.fraction == Approx(50.0 / 400));
  CHECK(*e.eta_seconds == Approx(35.0));
  CHECK(e.bytes_per_second == Approx(50.0));
}

TEST_CASE("estimate: a resumed run's rate counts only this run's samples") {
  ProgressSnapshot s = converting(150, 300, 600, 600);
  s.input_done = true;
  const ProgressEstimate e = estimate(s, 10.0, 100);  // 100 handled before this run
  CHECK(e.samples_per_second == Approx(5.0));
  CHECK(*e.eta_seconds == Approx(30.0));
}

TEST_CASE("estimate: nothing known yet is no number, not 0 % with an ETA of 0") {
  const ProgressEstimate none = estimate(converting(0, 0, 0, 1000), 2.0, 0);
  CHECK_FALSE(none.fraction);
  CHECK_FALSE(none.eta_seconds);
  // Standard input: no total, so no fraction until the input ends.
  const ProgressEstimate stdin_run = estimate(converting(10, 40, 400, 0), 2.0, 0);
  CHECK_FALSE(stdin_run.fraction);
  CHECK_FALSE(stdin_run.expected);
  CHECK(stdin_run.samples_per_second == Approx(5.0));
}

TEST_CASE("estimate: a phase that only reads goes by bytes") {
  ProgressSnapshot s;
  s.phase = "finding each key's last input (--on-duplicate last)";
  s.bytes_read = 300;
  s.total_bytes = 1200;
  const ProgressEstimate e = estimate(s, 3.0, 0);
  CHECK(*e.fraction == Approx(0.25));
  CHECK(*e.eta_seconds == Approx(9.0));
}

TEST_CASE("progress_line: samples done of expected, bytes as a second figure, the phase") {
  ProgressSnapshot s = converting(305, 400, 3 << 20, 3 << 20);
  s.samples = 300;
  s.skipped = 5;
  s.handled = 305;
  s.input_done = true;
  const std::string bar = progress_line(s, estimate(s, 10.0, 0), 10.0, true);
  CHECK(bar.starts_with("[##################......]  76% 300 of 400 samples, 5 skipped"));
  CHECK(bar.find("3.0 MiB of 3.0 MiB read") != std::string::npos);
  CHECK(bar.find("ETA 0m03s") != std::string::npos);
  const std::string plain = progress_line(s, estimate(s, 10.0, 0), 10.0, false);
  CHECK(plain.starts_with("progress:  76% 300 of 400 samples"));

  ProgressSnapshot scan;
  scan.phase = "finding the class folders (--classes-from-dirs)";
  scan.bytes_read = 1 << 20;
  scan.total_bytes = 4 << 20;
  const std::string line = progress_line(scan, estimate(scan, 1.0, 0), 1.0, false);
  CHECK(line.starts_with("progress:  25% finding the class folders (--classes-from-dirs): "));
}

// Issue #25, 16d: after SIGINT the reader's count of the samples met was taken as the total
// (the samples kept of those read: 99 %), and the last line said nothing of the stop.
TEST_CASE("progress_line: a stopped run says so, with the samples kept, and no ETA") {
  ProgressSnapshot s = converting(812, 820, 2 << 20, 3 << 20);  // not input_done: estimated
  s.phase = "stopped";
  s.stopped = true;
  const ProgressEstimate e = estimate(s, 4.0, 0);
  REQUIRE(e.expected);
  CHECK(*e.expected == 1230);  // 820 met per 2 MiB read, of 3 MiB
  CHECK_FALSE(e.eta_seconds);
  const std::string line = progress_line(s, e, 4.0, false);
  CHECK(line.starts_with("progress:  66% 812 of ~1230 samples"));
  CHECK(line.find("; stopped") != std::string::npos);
  CHECK(line.find("ETA") == std::string::npos);
}

// Issue #25 (stop note of session 13): with --instances the line said "3400 of 1000 samples",
// the outputs written against the input's samples.
TEST_CASE("progress_line: --instances counts the input's samples, the outputs beside them") {
  ProgressSnapshot s = converting(250, 1000, 1 << 20, 1 << 20);
  s.outputs = true;
  s.handled = 250;  // input samples done
  s.samples = 870;  // outputs written from them
  s.skipped = 3;    // outputs left out
  s.input_done = true;
  const ProgressEstimate e = estimate(s, 5.0, 0);
  REQUIRE(e.expected);
  CHECK(*e.expected == 1000);
  CHECK(*e.fraction == Approx(0.25));
  const std::string line = progress_line(s, e, 5.0, false);
  CHECK(
      line.starts_with("progress:  25% 250 of 1000 samples into 870 outputs, 3 skipped, "
                       "50 samples/s"));
  CHECK(line.find("left out") == std::string::npos);
}
