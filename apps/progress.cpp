#include "apps/progress.h"

#include <unistd.h>

#include <cstdio>

#include "common/bytes.h"

namespace tarmac::cli {

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}

void ProgressBar::update(const Progress& p) {
  if (!enabled_) return;
  const double rate = p.seconds > 0 ? p.samples / p.seconds : 0;
  const double bps = p.seconds > 0 ? p.bytes_read / p.seconds : 0;
  std::string line;
  char buf[256];
  if (p.total_bytes > 0) {
    const double frac = std::min(1.0, static_cast<double>(p.bytes_read) / p.total_bytes);
    const int width = 24, filled = static_cast<int>(frac * width);
    line.append("[").append(filled, '#').append(width - filled, '.').append("] ");
    std::snprintf(buf, sizeof buf, "%3.0f%% ", frac * 100);
    line += buf;
  }
  if (p.phase)
    std::snprintf(buf, sizeof buf, "%s read, %s/s", format_bytes(p.bytes_read).c_str(),
                  format_bytes(static_cast<uint64_t>(bps)).c_str());
  else
    std::snprintf(buf, sizeof buf, "%llu samples, %.0f samples/s, %s/s",
                  static_cast<unsigned long long>(p.samples), rate,
                  format_bytes(static_cast<uint64_t>(bps)).c_str());
  line += buf;
  if (p.skipped) line += ", " + std::to_string(p.skipped) + " skipped";
  if (p.total_bytes > 0 && bps > 0 && !p.final) {
    const double eta = (p.total_bytes - static_cast<double>(p.bytes_read)) / bps;
    std::snprintf(buf, sizeof buf, ", ETA %dm%02ds", static_cast<int>(eta) / 60,
                  static_cast<int>(eta) % 60);
    line += buf;
  }
  if (p.phase) line = std::string(p.phase) + ": " + line;
  std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), p.final ? "\n" : "");
  std::fflush(stderr);
  drawn_ = !p.final;
}

void ProgressBar::end_line() {
  if (!drawn_) return;
  std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace tarmac::cli
