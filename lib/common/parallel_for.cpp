#include "common/parallel_for.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace tarmac::detail {
namespace {

// What the threads share: counters as atomics, the failure and the count of threads that
// have ended under the mutex.
struct Shared {
  std::atomic<size_t> next{0};  // the next task to start: tasks start in index order
  std::atomic<size_t> done{0};  // tasks finished without throwing
  std::atomic<bool> halt{false};
  std::mutex mu;
  std::condition_variable ended_cv;
  size_t ended = 0;
  size_t failed_index = SIZE_MAX;
  std::exception_ptr failure;
};

void work(size_t n, const ParallelOptions& o, const std::function<void(size_t)>& run, Shared& s) {
  while (!s.halt.load() && !(o.stop && o.stop->requested())) {
    const size_t i = s.next.fetch_add(1);
    if (i >= n) break;
    try {
      run(i);
      s.done.fetch_add(1);
    } catch (...) {
      const std::lock_guard lk(s.mu);
      if (i < s.failed_index) {
        s.failed_index = i;
        s.failure = std::current_exception();
      }
      s.halt.store(true);
    }
  }
  const std::lock_guard lk(s.mu);
  ++s.ended;
  s.ended_cv.notify_all();
}

}  // namespace

void parallel_run(size_t n, const ParallelOptions& o, const std::function<void(size_t)>& run) {
  Shared s;
  auto report = [&](bool final) {
    if (!o.progress) return;
    ParallelProgress p;
    p.tasks_done = s.done.load();
    p.tasks_total = n;
    p.bytes_done = o.bytes ? o.bytes->load() : 0;
    p.final = final;
    o.progress(p);
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t count = std::min<size_t>(o.threads > 0 ? o.threads : cores, n);
  std::vector<std::thread> threads;
  std::exception_ptr own;  // starting a thread failed, or the progress callback threw
  try {
    threads.reserve(count);
    for (size_t t = 0; t < count; ++t)
      threads.emplace_back(work, n, std::cref(o), std::cref(run), std::ref(s));
    std::unique_lock lk(s.mu);
    while (!s.ended_cv.wait_for(lk, o.interval, [&] { return s.ended == threads.size(); })) {
      lk.unlock();  // the callback runs without the lock the threads end under
      report(false);
      lk.lock();
    }
  } catch (...) {
    own = std::current_exception();
    s.halt.store(true);
  }
  for (std::thread& t : threads) t.join();
  if (own) std::rethrow_exception(own);
  if (s.failure) std::rethrow_exception(s.failure);
  throw_if_stopped(o.stop);
  report(true);
}

}  // namespace tarmac::detail
