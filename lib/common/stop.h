#pragma once
// A request to stop a long run early (SIGINT/SIGTERM, or a library caller), set from a signal
// handler and polled by the run: lock-free atomics only, so async-signal-safe to set.
#include <atomic>
#include <cstring>
#include <string>

#include "common/error.h"

namespace tarmac {

struct StopRequest {
  std::atomic<int> signal{0};  ///< the first signal's number (0: none; another cause: any > 0)
  std::atomic<int> count{0};   ///< how many requests came: 1 stop gracefully, 2 stop now
  /// Set by the run while it writes the checkpoint of a stop, so that a watchdog that ends a
  /// run which does not stop (cli::stop_on_signals) lets it finish that.
  mutable std::atomic<bool> checkpointing{false};

  /// Records one request; safe in a signal handler.
  void request(int sig) noexcept {
    int none = 0;
    signal.compare_exchange_strong(none, sig);
    count.fetch_add(1);
  }
  bool requested() const noexcept { return count.load() > 0; }
  bool urgent() const noexcept { return count.load() > 1; }
};
static_assert(std::atomic<int>::is_always_lock_free);

/// "SIGTERM", "SIGINT", ... ("signal N" for one without a name).
inline std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

/// A run ended by a stop request (merge; convert throws its own ConvertStopped).
class Interrupted : public FatalError {
 public:
  explicit Interrupted(int signal)
      : FatalError("stopped by " + signal_name(signal)), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// Throws Interrupted when `stop` (may be null) has a request.
inline void throw_if_stopped(const StopRequest* stop) {
  if (stop && stop->requested()) throw Interrupted(stop->signal.load());
}

}  // namespace tarmac
