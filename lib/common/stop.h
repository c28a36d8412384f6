#pragma once
// A request to stop a long run early (SIGINT/SIGTERM, or a library caller), set from a signal
// handler and polled by the run: lock-free atomics only, so async-signal-safe to set. (The
// busy marks, for the watchdog's message, take a lock: the run's threads set them, never a
// handler.)
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/error.h"

namespace tarmac {

struct StopRequest {
  std::atomic<int> signal{0};  ///< the first signal's number (0: none; another cause: any > 0)
  std::atomic<int> count{0};   ///< how many requests came: 1 stop gracefully, 2 stop now
  /// Set by the run while it writes the checkpoint of a stop, so that a watchdog that ends a
  /// run which does not stop (cli::stop_on_signals) lets it finish that.
  mutable std::atomic<bool> checkpointing{false};
  /// Set by the run once the checkpoint of a stop is written: what is left (threads ending, one
  /// perhaps inside a long encode that polls nothing) may then be cut short by the watchdog as
  /// safely as by SIGKILL, without waiting its full bound.
  mutable std::atomic<bool> checkpointed{false};

  /// Describes what a thread is busy with, only when asked (the watchdog's message), so that
  /// marking it costs a lock, not a string.
  using Describe = std::string (*)(const void* what);
  /// Marks the calling thread busy with `what`, which must stay alive until its end_busy().
  void begin_busy(const void* what, Describe describe) const {
    const std::lock_guard lk(busy_mu_);
    busy_[std::this_thread::get_id()] = {what, describe};
  }
  void end_busy() const {
    const std::lock_guard lk(busy_mu_);
    busy_.erase(std::this_thread::get_id());
  }
  bool busy() const {
    const std::lock_guard lk(busy_mu_);
    return !busy_.empty();
  }
  /// What the busy threads do ("the conversion of sample 'k/1' (a 20000x20000 PNG)", joined by
  /// "; "), "" when none is marked.
  std::string busy_text() const {
    const std::lock_guard lk(busy_mu_);
    std::string text;
    for (const auto& [id, b] : busy_) text += (text.empty() ? "" : "; ") + b.second(b.first);
    return text;
  }

  /// Records one request; safe in a signal handler.
  void request(int sig) noexcept {
    int none = 0;
    signal.compare_exchange_strong(none, sig);
    count.fetch_add(1);
  }
  bool requested() const noexcept { return count.load() > 0; }
  bool urgent() const noexcept { return count.load() > 1; }

 private:
  mutable std::mutex busy_mu_;
  mutable std::map<std::thread::id, std::pair<const void*, Describe>> busy_;
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
      : FatalError("stopped by " + signal_name(signal), Grade::Interrupted, signal) {}
};

/// Throws Interrupted when `stop` (may be null) has a request.
inline void throw_if_stopped(const StopRequest* stop) {
  if (stop && stop->requested()) throw Interrupted(stop->signal.load());
}

}  // namespace tarmac
