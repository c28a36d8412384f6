#include "apps/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/bytes.h"

namespace tarmac::cli {
namespace {

std::string duration_text(double s) {
  char buf[32];
  const long long t = std::llround(s);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  return buf;
}

// Columns of the terminal on stderr (0: unknown), so that the line never wraps: a wrapped line
// is not redrawn by a carriage return.
size_t terminal_columns() {
  struct winsize ws {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) return ws.ws_col;
  return 0;
}

// Phases that convert samples are timed as one (the last line's rate is the whole run's).
std::string timing_key(const ProgressSnapshot& s) {
  return s.counts_samples ? std::string("samples") : s.phase;
}

}  // namespace

ProgressMode progress_mode(const std::string& flag, bool quiet, bool stderr_is_terminal) {
  if (flag != "auto" && flag != "bar" && flag != "plain" && flag != "none")
    throw CLI::ValidationError("--progress", "'" + flag + "': use auto, bar, plain or none");
  if (quiet || flag == "none") return ProgressMode::None;
  if (flag == "bar") return ProgressMode::Bar;
  if (flag == "plain") return ProgressMode::Plain;
  return stderr_is_terminal ? ProgressMode::Bar : ProgressMode::Plain;
}

ProgressSnapshot snapshot_of(const ConvertProgress& p) {
  ProgressSnapshot s;
  const ConvertProgress::Phase phase = p.phase.load();
  if (phase == ConvertProgress::Phase::Starting) return s;
  s.phase = phase_text(phase);
  s.counts_samples =
      phase == ConvertProgress::Phase::Converting || phase == ConvertProgress::Phase::Finishing ||
      phase == ConvertProgress::Phase::Done || phase == ConvertProgress::Phase::Stopped;
  s.stopped = phase == ConvertProgress::Phase::Stopped;
  // The flag before the counts it covers: a final `seen` is never read as an estimate.
  s.input_done = p.input_done.load();
  s.samples = p.samples.load(std::memory_order_relaxed);
  s.skipped = p.skipped.load(std::memory_order_relaxed);
  s.handled = p.handled.load(std::memory_order_relaxed);
  s.outputs = p.outputs.load(std::memory_order_relaxed);
  s.seen = p.seen.load(std::memory_order_relaxed);
  s.bytes_read = p.bytes_read.load(std::memory_order_relaxed);
  s.total_bytes = p.total_bytes.load(std::memory_order_relaxed);
  return s;
}

ProgressEstimate estimate(const ProgressSnapshot& s, double seconds, uint64_t handled0) {
  ProgressEstimate e;
  if (seconds > 0) {
    e.samples_per_second = static_cast<double>(s.handled - std::min(handled0, s.handled)) / seconds;
    e.bytes_per_second = static_cast<double>(s.bytes_read) / seconds;
  }
  if (!s.counts_samples) {  // a phase that only reads: how far by bytes
    if (s.total_bytes > 0) {
      e.fraction = std::min(1.0, static_cast<double>(s.bytes_read) / s.total_bytes);
      if (e.bytes_per_second > 0)
        e.eta_seconds =
            (s.total_bytes - std::min(s.bytes_read, s.total_bytes)) / e.bytes_per_second;
    }
    return e;
  }
  if (s.input_done) {
    e.expected = s.seen;
  } else if (s.total_bytes > 0 && s.bytes_read > 0 && s.seen > 0) {
    const double per_byte = static_cast<double>(s.seen) / s.bytes_read;
    e.expected =
        std::max<uint64_t>(s.seen, static_cast<uint64_t>(std::llround(per_byte * s.total_bytes)));
  }
  if (!e.expected) return e;
  const uint64_t total = std::max(*e.expected, s.handled);
  e.expected = total;
  e.fraction = total ? static_cast<double>(s.handled) / total : 1.0;
  if (e.samples_per_second > 0 && !s.stopped)
    e.eta_seconds = (total - s.handled) / e.samples_per_second;
  return e;
}

std::string progress_line(const ProgressSnapshot& s, const ProgressEstimate& e, double seconds,
                          bool bar) {
  std::string line;
  char buf[256];
  if (bar) {
    const int width = 24;
    const int filled = e.fraction ? static_cast<int>(*e.fraction * width) : 0;
    line.append("[").append(filled, '#').append(width - filled, '.').append("] ");
  } else {
    line = "progress: ";
  }
  if (e.fraction) {
    std::snprintf(buf, sizeof buf, "%3.0f%% ", 100 * *e.fraction);
    line += buf;
  } else {
    line += bar ? "  ?% " : "";
  }
  if (!s.counts_samples) line += s.phase + ": ";
  if (s.counts_samples) {
    // Samples done of the samples expected: written ones, or with --instances the input's
    // samples handled, and the outputs they made beside them (never outputs of samples).
    std::snprintf(buf, sizeof buf, "%llu",
                  static_cast<unsigned long long>(s.outputs ? s.handled : s.samples));
    line += buf;
    if (e.expected)
      line += std::string(" of ") + (s.input_done ? "" : "~") + std::to_string(*e.expected);
    line += " samples";
    if (s.outputs) line += " into " + std::to_string(s.samples) + " outputs";
    if (s.skipped) line += ", " + std::to_string(s.skipped) + " skipped";
    if (!s.outputs && s.handled > s.samples + s.skipped)
      line += ", " + std::to_string(s.handled - s.samples - s.skipped) + " left out";
    std::snprintf(buf, sizeof buf, ", %.0f samples/s", e.samples_per_second);
    line += buf;
    line += "; ";
  }
  line += format_bytes(s.bytes_read);
  if (s.total_bytes) line += " of " + format_bytes(s.total_bytes);
  line += " read, " + format_bytes(static_cast<uint64_t>(e.bytes_per_second)) + "/s";
  if (s.counts_samples && s.phase != "converting") line += "; " + s.phase;
  if (e.eta_seconds && (!e.fraction || *e.fraction < 1))
    line += "; ETA " + duration_text(*e.eta_seconds);
  else if (!bar || (e.fraction && *e.fraction >= 1))
    line += "; " + duration_text(seconds);
  return line;
}

ProgressDisplay::ProgressDisplay(ProgressMode mode, double every_seconds,
                                 std::function<ProgressSnapshot()> read)
    : mode_(mode),
      every_(mode == ProgressMode::Bar
                 ? std::chrono::milliseconds(200)
                 : std::chrono::milliseconds(static_cast<int64_t>(every_seconds * 1000))),
      read_(std::move(read)),
      phase_t0_(std::chrono::steady_clock::now()) {
  if (mode_ != ProgressMode::None) thread_ = std::thread([this] { loop(); });
}

void print_bytes_progress(const std::string& label, uint64_t done, uint64_t total, double seconds,
                          bool bar, bool final) {
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const auto rate = static_cast<uint64_t>(seconds > 0 ? static_cast<double>(done) / seconds : 0);
  std::fprintf(stderr, "%s%s %3.0f%%  %s of %s, %s/s%s", bar ? "\r\033[K" : "", label.c_str(),
               100 * frac, format_bytes(done).c_str(), format_bytes(total).c_str(),
               format_bytes(rate).c_str(), !bar || final ? "\n" : "");
}

ProgressDisplay::~ProgressDisplay() {
  finish(false);
}

void ProgressDisplay::loop() {
  std::unique_lock lk(mu_);
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    // Plain lines: one when a phase starts, then every `every_`; the bar: every 200 ms.
    const ProgressSnapshot s = read_();
    if (!s.phase.empty() && (timing_key(s) != phase_ || std::chrono::steady_clock::now() >= next)) {
      lk.unlock();
      draw(false);
      lk.lock();
      next = std::chrono::steady_clock::now() + every_;
    }
    cv_.wait_for(lk, mode_ == ProgressMode::Bar ? every_ : std::chrono::milliseconds(100),
                 [this] { return stop_; });
  }
}

void ProgressDisplay::draw(bool last) {
  const ProgressSnapshot s = read_();
  const auto now = std::chrono::steady_clock::now();
  if (timing_key(s) != phase_) {  // rates and ETAs are per phase; converting to done is one
    phase_ = timing_key(s);
    phase_t0_ = now;
    handled0_ = s.handled;
  }
  const double seconds = std::chrono::duration<double>(now - phase_t0_).count();
  std::string line =
      progress_line(s, estimate(s, seconds, handled0_), seconds, mode_ == ProgressMode::Bar);
  if (mode_ == ProgressMode::Bar) {
    const size_t cols = terminal_columns();
    if (cols > 1 && line.size() > cols - 1) line.resize(cols - 1);
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), last ? "\n" : "");
    drawn_ = !last;
  } else {
    std::fprintf(stderr, "tarmac: %s\n", line.c_str());
  }
  std::fflush(stderr);
}

void ProgressDisplay::finish(bool completed) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (completed || read_().stopped) {
    draw(true);
  } else if (drawn_) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace tarmac::cli
