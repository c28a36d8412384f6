#include "apps/signals.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

namespace tarmac::cli {
namespace {

StopRequest g_stop;

extern "C" void on_stop_signal(int sig) {
  if (g_stop.count.load() >= 2) {  // asked twice already: the default action now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop.request(sig);
}

// Ends a run that has not stopped kStopExitSeconds after the first signal (2 s after the
// second; kAfterCheckpoint after the stop's checkpoint is written while a worker is still
// inside a sample's conversion): one blocked in a read that never returns (a stalled pipe, a
// FIFO without a writer) or in work that does not poll the request (a worker encoding a huge
// image). Exiting there is as safe as SIGKILL, which the kill tests prove; only the checkpoint
// of a stop in progress is waited for. The message names what the run was busy with where it
// knows (StopRequest::begin_busy).
void watch_stop() {
  using Clock = std::chrono::steady_clock;
  const auto tick = std::chrono::milliseconds(100);
  constexpr auto kAfterCheckpoint = std::chrono::seconds(1);
  while (!g_stop.requested()) std::this_thread::sleep_for(tick);
  const auto first = Clock::now();
  std::optional<Clock::time_point> second, checkpointed;
  const auto due = [&] {
    auto late = first + std::chrono::seconds(kStopExitSeconds);
    if (second) late = std::min(late, *second + std::chrono::seconds(2));
    if (checkpointed) late = std::min(late, *checkpointed + kAfterCheckpoint);
    return late;
  };
  while (Clock::now() < due() || g_stop.checkpointing.load()) {
    if (!second && g_stop.urgent()) second = Clock::now();
    // After the stop's checkpoint only a worker inside a conversion is not waited for: the
    // rest (threads joined, an upload's lock object released) is quick, and given its time.
    if (!checkpointed && g_stop.checkpointed.load() && g_stop.busy()) checkpointed = Clock::now();
    std::this_thread::sleep_for(tick);
  }
  const int sig = g_stop.signal.load();
  const std::string busy = g_stop.busy_text();
  std::string text = "tarmac: error: stopped by " + signal_name(sig) + ": ";
  if (checkpointed)
    text += "the checkpoint of the stop is written; not waiting for " +
            (busy.empty() ? std::string("the workers") : busy) +
            " to end (it cannot be interrupted), so tarmac exits now; go on with --resume\n";
  else
    text += "the run did not stop in time (" +
            (busy.empty() ? std::string("blocked waiting for input that does not come?")
                          : "waiting for " + busy) +
            "), so it exits now; whatever its last checkpoint holds is kept (go on with "
            "--resume)\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
  ::_exit(signal_exit_code(sig));
}

}  // namespace

const StopRequest& stop_on_signals() {
  static const bool installed = [] {
    std::thread(watch_stop).detach();
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads and writes go on; the run polls the request
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return g_stop;
}

int signal_exit_code(int signal) {
  return 128 + signal;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) {
    if (!text.empty()) text += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      text += a;
      continue;
    }
    text += '\'';
    for (char c : a) text += c == '\'' ? std::string("'\\''") : std::string(1, c);
    text += '\'';
  }
  return text;
}

}  // namespace tarmac::cli
