#include "common/parallel_for.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

using namespace tarmac;
using namespace std::chrono_literals;

namespace {

// Counts the tasks started and running, to show that none runs once parallel_for is back.
struct Tally {
  std::vector<std::atomic<int>> started;
  std::atomic<int> running{0};
  explicit Tally(size_t n) : started(n) {}
  int total() const {
    int t = 0;
    for (const auto& s : started) t += s.load();
    return t;
  }
};

// Checks that after a while no task has started or is running: every thread was joined.
void require_quiet(const Tally& tally) {
  const int before = tally.total();
  CHECK(tally.running.load() == 0);
  std::this_thread::sleep_for(20ms);
  CHECK(tally.total() == before);
  CHECK(tally.running.load() == 0);
}

}  // namespace

TEST_CASE("parallel_for: results in index order, each task run once") {
  for (unsigned threads : {0u, 1u, 3u, 8u}) {
    INFO("threads " << threads);
    const size_t n = 500;
    Tally tally(n);
    ParallelOptions o;
    o.threads = threads;
    const std::vector<uint64_t> r = parallel_for(n, o, [&](size_t i) {
      tally.started[i].fetch_add(1);
      if (i % 7 == 0) std::this_thread::sleep_for(100us);  // finish out of order
      return uint64_t{i} * i + 1;
    });
    REQUIRE(r.size() == n);
    for (size_t i = 0; i < n; ++i) {
      CHECK(r[i] == uint64_t{i} * i + 1);
      CHECK(tally.started[i].load() == 1);
    }
  }
}

TEST_CASE("parallel_for: the exception of the lowest failing task is rethrown") {
  for (unsigned threads : {1u, 2u, 4u}) {
    INFO("threads " << threads);
    const size_t n = 200;
    Tally tally(n);
    ParallelOptions o;
    o.threads = threads;
    auto task = [&](size_t i) {
      tally.started[i].fetch_add(1);
      tally.running.fetch_add(1);
      struct Leave {
        Tally& t;
        ~Leave() { t.running.fetch_sub(1); }
      } leave{tally};
      // Task 37 fails last in time: the others fail at once, it only after a while.
      if (i == 37) {
        std::this_thread::sleep_for(30ms);
        throw ParseError("task 37");
      }
      if (i == 38 || i == 90 || i == 150) throw std::runtime_error("task " + std::to_string(i));
      return i;
    };
    try {
      parallel_for(n, o, task);
      FAIL("no exception");
    } catch (const ParseError& e) {  // its type kept
      CHECK(std::string(e.what()) == "task 37");
    }
    for (size_t i = 0; i <= 37; ++i) CHECK(tally.started[i].load() == 1);
    if (threads == 1)  // serial: nothing after the failure starts
      for (size_t i = 38; i < n; ++i) CHECK(tally.started[i].load() == 0);
    require_quiet(tally);
  }
}

TEST_CASE("parallel_for: a stop request mid-way starts no further task and is Interrupted") {
  for (unsigned threads : {1u, 4u}) {
    INFO("threads " << threads);
    const size_t n = 100;
    Tally tally(n);
    StopRequest stop;
    ParallelOptions o;
    o.threads = threads;
    o.stop = &stop;
    auto task = [&](size_t i) {
      tally.started[i].fetch_add(1);
      tally.running.fetch_add(1);
      if (i == 10) stop.request(SIGTERM);
      std::this_thread::sleep_for(1ms);
      tally.running.fetch_sub(1);
      return i;
    };
    try {
      parallel_for(n, o, task);
      FAIL("no exception");
    } catch (const Interrupted& e) {
      CHECK(std::string(e.what()) == "stopped by SIGTERM");
      CHECK(e.grade() == Grade::Interrupted);
      CHECK(e.signal() == SIGTERM);
    }
    // Once task 10 asks, each other thread starts at most the one task it was taking.
    CHECK(tally.total() <= 11 + static_cast<int>(threads) - 1);
    if (threads == 1) CHECK(tally.total() == 11);
    require_quiet(tally);
  }
  SECTION("a request before the start runs nothing") {
    StopRequest stop;
    stop.request(SIGINT);
    ParallelOptions o;
    o.stop = &stop;
    int ran = 0;
    CHECK_THROWS_AS(parallel_for(5, o, [&](size_t i) { return ran += int(i) + 1; }), Interrupted);
    CHECK(ran == 0);
  }
}

TEST_CASE("parallel_for: one thread runs the tasks in order, not on the caller's thread") {
  ParallelOptions o;
  o.threads = 1;
  std::vector<size_t> order;  // written by the one worker, read after it is joined
  std::vector<std::thread::id> ids;
  const std::vector<size_t> r = parallel_for(50, o, [&](size_t i) {
    order.push_back(i);
    ids.push_back(std::this_thread::get_id());
    return i;
  });
  REQUIRE(order.size() == 50);
  for (size_t i = 0; i < 50; ++i) {
    CHECK(order[i] == i);
    CHECK(ids[i] == ids[0]);
  }
  CHECK(ids[0] != std::this_thread::get_id());
  CHECK(r == order);
}

TEST_CASE("parallel_for: no task, no thread; progress says 0 of 0, final") {
  std::vector<ParallelProgress> seen;
  ParallelOptions o;
  o.progress = [&](const ParallelProgress& p) { seen.push_back(p); };
  int calls = 0;
  const std::vector<int> r = parallel_for(0, o, [&](size_t) { return ++calls; });
  CHECK(r.empty());
  CHECK(calls == 0);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].final);
  CHECK(seen[0].tasks_done == 0);
  CHECK(seen[0].tasks_total == 0);
}

TEST_CASE("parallel_for: progress from the caller's thread, bounded, monotone, ending at n") {
  const size_t n = 24;
  std::atomic<uint64_t> bytes{0};
  struct Call {
    ParallelProgress p;
    std::chrono::steady_clock::time_point at;
    std::thread::id thread;
  };
  std::vector<Call> calls;
  ParallelOptions o;
  o.threads = 2;
  o.bytes = &bytes;
  o.interval = 4ms;
  o.progress = [&](const ParallelProgress& p) {
    calls.push_back({p, std::chrono::steady_clock::now(), std::this_thread::get_id()});
  };
  // 12 tasks of 5 ms on each thread: at least 60 ms, so the 4 ms wait times out at least once.
  const std::vector<size_t> r = parallel_for(n, o, [&](size_t i) {
    std::this_thread::sleep_for(5ms);
    bytes.fetch_add(10);
    return i;
  });
  REQUIRE(r.size() == n);
  REQUIRE(calls.size() >= 2);
  for (size_t k = 0; k < calls.size(); ++k) {
    const ParallelProgress& p = calls[k].p;
    CHECK(calls[k].thread == std::this_thread::get_id());
    CHECK(p.tasks_total == n);
    CHECK(p.final == (k + 1 == calls.size()));
    CHECK(p.tasks_done <= n);
    if (k == 0) continue;
    const ParallelProgress& q = calls[k - 1].p;
    CHECK(p.tasks_done >= q.tasks_done);
    CHECK(p.bytes_done >= q.bytes_done);
    if (!p.final) CHECK(calls[k].at - calls[k - 1].at >= o.interval);
  }
  CHECK(calls.back().p.tasks_done == n);
  CHECK(calls.back().p.bytes_done == 10 * n);
}

TEST_CASE("parallel_for: a progress callback that throws ends the run, every thread joined") {
  const size_t n = 400;
  Tally tally(n);
  ParallelOptions o;
  o.threads = 3;
  o.interval = 1ms;
  o.progress = [](const ParallelProgress& p) {
    if (!p.final) throw std::runtime_error("progress failed");
  };
  auto task = [&](size_t i) {
    tally.started[i].fetch_add(1);
    tally.running.fetch_add(1);
    std::this_thread::sleep_for(1ms);
    tally.running.fetch_sub(1);
    return i;
  };
  CHECK_THROWS_WITH(parallel_for(n, o, task), "progress failed");
  CHECK(tally.total() < static_cast<int>(n));  // 400 tasks of 1 ms on 3 threads: 133 ms at least
  require_quiet(tally);
}
