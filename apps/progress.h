#pragma once
// The progress of a long command on stderr, drawn by a thread of its own at a fixed rate from
// counters the library updates (convert/convert.h's ConvertProgress): a line redrawn several
// times a second on a terminal, or a plain line every few seconds for a log (Slurm's).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "convert/convert.h"

namespace tarmac::cli {

enum class ProgressMode { None, Bar, Plain };

/// --progress auto|bar|plain|none: auto is a bar when stderr is a terminal, plain lines when
/// not; -q draws none. Throws CLI::ValidationError for another word.
ProgressMode progress_mode(const std::string& flag, bool quiet, bool stderr_is_terminal);

/// One reading of the counters.
struct ProgressSnapshot {
  std::string phase;  ///< what the command is doing ("converting", ...); "": nothing to show yet
  bool counts_samples = false;  ///< a phase that converts samples (else it only reads)
  bool stopped = false;         ///< a stop request ended the run: no ETA, a last line says so
  uint64_t samples = 0, skipped = 0, handled = 0, seen = 0;
  /// --instances: `samples` and `skipped` count outputs, `handled` and `seen` input samples.
  bool outputs = false;
  bool input_done = false;
  uint64_t bytes_read = 0, total_bytes = 0;
};

/// A reading of a conversion's counters.
ProgressSnapshot snapshot_of(const ConvertProgress& p);

/// What the counters say of the whole: how far (0..1), how many samples in all, how long to go.
struct ProgressEstimate {
  std::optional<double> fraction;
  std::optional<uint64_t> expected;  ///< samples in all (exact once the input is read)
  std::optional<double> eta_seconds;
  double samples_per_second = 0, bytes_per_second = 0;
};

/// The estimate after `seconds` in the phase, in which `handled0` samples were handled at its
/// start (a resumed run's). Expected samples = samples seen so far × total bytes / bytes read;
/// the ETA is the samples to go at the phase's rate of handled samples.
ProgressEstimate estimate(const ProgressSnapshot& s, double seconds, uint64_t handled0);

/// The line drawn: "[####....]  42% 1234 of ~2938 samples, 3 skipped, 85 samples/s; 1.2 GiB of
/// 2.9 GiB read; ETA 0m20s". `bar`: with the bar (else "progress: " and the elapsed time).
std::string progress_line(const ProgressSnapshot& s, const ProgressEstimate& e, double seconds,
                          bool bar);

/// One line of a byte-counted progress on stderr: "LABEL  42%  1.2 GiB of 2.9 GiB, 300 MiB/s"
/// (LABEL e.g. "verify:"), redrawn in place on a terminal (`bar`; ended by the `final` call),
/// else a line of its own.
void print_bytes_progress(const std::string& label, uint64_t done, uint64_t total, double seconds,
                          bool bar, bool final);

/// Draws the progress of `read()` on stderr until finish() (or destruction): every 200 ms as
/// one redrawn line (Bar), or every `every_seconds` as a plain line, and when the phase changes
/// (Plain).
class ProgressDisplay {
 public:
  ProgressDisplay(ProgressMode mode, double every_seconds, std::function<ProgressSnapshot()> read);
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  /// Stops drawing. `completed`: draws the last line (100 %); else only ends the bar's line,
  /// so that messages start on a line of their own, but for a stopped run, whose last line
  /// says "stopped" with the samples kept.
  void finish(bool completed);

 private:
  void loop();
  void draw(bool last);

  ProgressMode mode_;
  std::chrono::milliseconds every_;
  std::function<ProgressSnapshot()> read_;
  std::chrono::steady_clock::time_point phase_t0_;
  std::string phase_;  // the phase being timed
  uint64_t handled0_ = 0;
  bool drawn_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tarmac::cli
