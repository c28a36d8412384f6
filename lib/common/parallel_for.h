#pragma once
// Runs independent tasks 0..n-1 on a few threads and gives their results back in index order:
// verify's shards, and any other stage whose parts need not know each other. The calling
// thread only waits and reports progress; every thread is joined before parallel_for returns
// or throws.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/stop.h"

namespace tarmac {

/// How far the tasks are.
struct ParallelProgress {
  size_t tasks_done = 0, tasks_total = 0;
  uint64_t bytes_done = 0;  ///< what the tasks added to ParallelOptions::bytes (0 without it)
  bool final = false;       ///< every task has finished
};

struct ParallelOptions {
  unsigned threads = 0;  ///< 0 = all cores; never more than there are tasks
  /// Polled before each task: a request starts no further task and ends the run with
  /// Interrupted. Null: never.
  const StopRequest* stop = nullptr;
  /// A counter the tasks add their bytes to (the caller owns it); progress reports it.
  const std::atomic<uint64_t>* bytes = nullptr;
  /// Called from the calling thread every `interval` while tasks run, and once at the end
  /// (final) when all succeeded; never concurrently. May be empty.
  std::function<void(const ParallelProgress&)> progress;
  std::chrono::milliseconds interval{250};
};

namespace detail {
/// Runs run(i) for i in [0, n) as parallel_for does; run(i) keeps its own result.
void parallel_run(size_t n, const ParallelOptions& options, const std::function<void(size_t)>& run);
}  // namespace detail

/// task(i) for every i in [0, n), on up to options.threads threads; the results in index order.
/// When tasks throw, no further task starts, and once all threads are joined the exception of
/// the lowest failing index is rethrown: every task below it has run (tasks start in index
/// order), so it is the one a serial loop would have thrown. Then a stop request throws
/// Interrupted, even when every task had finished.
template <class Task>
auto parallel_for(size_t n, const ParallelOptions& options, Task&& task)
    -> std::vector<std::invoke_result_t<Task&, size_t>> {
  using R = std::invoke_result_t<Task&, size_t>;
  static_assert(!std::is_void_v<R>, "a task returns its result");
  std::vector<std::optional<R>> slots(n);  // slot i written by the thread of task i alone
  detail::parallel_run(n, options, [&](size_t i) { slots[i].emplace(task(i)); });
  std::vector<R> results;
  results.reserve(n);
  for (std::optional<R>& s : slots) results.push_back(std::move(*s));
  return results;
}

}  // namespace tarmac
