#include "apps/signals.h"

#include <csignal>

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

}  // namespace

const StopRequest& stop_on_signals() {
  static const bool installed = [] {
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
