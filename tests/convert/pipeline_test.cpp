#include "convert/pipeline.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>

using namespace tarmac;

namespace {

RawSample raw(const std::string& key, size_t bytes = 4) {
  RawSample r;
  r.key = key;
  r.members.push_back({key + ".bin", std::vector<uint8_t>(bytes, 7)});
  return r;
}

Item item(uint64_t seq, const std::string& key) {
  Item it;
  it.seq = seq;
  Entry e;
  e.raw = raw(key);
  it.entries.push_back(std::move(e));
  return it;
}

// A fake transform: the output key says which sample it came from and how many bytes it had.
ProcessedSample fake_work(const RawSample& r) {
  ProcessedSample s;
  s.key = r.key + ":" + std::to_string(r.bytes());
  return s;
}

}  // namespace

TEST_CASE("pipeline: the writer gets items in order whatever order the workers finish in") {
  constexpr uint64_t kItems = 200;
  Pipeline pipe(kItems);
  for (uint64_t k = 0; k < kItems; ++k) REQUIRE(pipe.push(item(k, std::to_string(k))));
  pipe.close_input(kItems);
  // The test is the workers: it takes every item, then finishes them in a shuffled order, one
  // each time the writer has to wait for the next item in order.
  std::vector<Item> taken;
  while (auto work = pipe.take()) {
    REQUIRE(work->item);
    for (Entry& e : work->item->entries) e.done = fake_work(e.raw);
    taken.push_back(std::move(*work->item));
  }
  REQUIRE(taken.size() == kItems);
  std::vector<size_t> order(kItems);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  REQUIRE_FALSE(std::is_sorted(order.begin(), order.end()));
  size_t finished = 0;
  std::vector<bool> is_finished(kItems, false);
  const auto finish_one = [&] {
    if (finished == kItems) return;
    const size_t k = order[finished++];
    is_finished[k] = true;
    pipe.finish(std::move(taken[k]));
  };
  uint64_t expected = 0;
  bool prefix_finished = true;  // each item handed on only after it and all before it finished
  while (auto it = pipe.next(std::chrono::milliseconds(1), finish_one)) {
    CHECK(it->seq == expected);
    CHECK(it->entries.at(0).done->key == std::to_string(expected) + ":4");
    for (uint64_t k = 0; k <= it->seq && k < kItems; ++k) prefix_finished &= is_finished[k];
    ++expected;
  }
  CHECK(expected == kItems);
  CHECK(finished == kItems);
  CHECK(prefix_finished);
}

namespace {

// What a test waits for, set once from any thread: the first set() wins. A pipeline's wait hook
// may set it (it takes only its own lock, never the pipeline's).
class Event {
 public:
  void set(int what) {
    const std::lock_guard lk(mu_);
    if (value_ == 0) value_ = what;
    cv_.notify_all();
  }
  int wait() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return value_ != 0; });
    return value_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int value_ = 0;
};

constexpr int kBlocked = 1, kReturned = 2;

}  // namespace

TEST_CASE("pipeline: the reader blocks while max_in_flight items are not retired") {
  Pipeline pipe(2);
  Event reader;  // whichever comes first: the push blocks for room, or it returns
  pipe.set_wait_hooks({.reader = [&] { reader.set(kBlocked); }, .worker = {}, .writer = {}});
  REQUIRE(pipe.push(item(0, "a")));
  REQUIRE(pipe.push(item(1, "b")));
  std::atomic<bool> pushed{false};
  std::thread thread([&] {
    pushed = pipe.push(item(2, "c"));
    reader.set(kReturned);
  });
  CHECK(reader.wait() == kBlocked);  // two items in flight: no room for a third
  CHECK_FALSE(pushed);
  auto w = pipe.take();
  REQUIRE(w);
  pipe.finish(std::move(*w->item));
  auto first = pipe.next(std::chrono::milliseconds(10), [] {});
  REQUIRE(first);
  CHECK(first->seq == 0);
  thread.join();  // room for one more: the push went through
  CHECK(pushed);
}

TEST_CASE("pipeline: cancel wakes every side and refuses new work") {
  Pipeline pipe(1);
  Event reader_blocked, writer_waiting;
  pipe.set_wait_hooks({.reader = [&] { reader_blocked.set(kBlocked); },
                       .worker = {},
                       .writer = [&] { writer_waiting.set(kBlocked); }});
  REQUIRE(pipe.push(item(0, "a")));
  std::atomic<int> woke{0};
  std::thread blocked_reader([&] {
    if (!pipe.push(item(1, "b"))) ++woke;
  });
  std::thread writer([&] {
    if (!pipe.next(std::chrono::milliseconds(10), [] {})) ++woke;
  });
  reader_blocked.wait();  // both sides are waiting: for room, and for item 0 to be finished
  writer_waiting.wait();
  pipe.cancel();
  blocked_reader.join();
  writer.join();
  CHECK(woke == 2);
  CHECK_FALSE(pipe.take());
  CHECK_FALSE(pipe.push(item(2, "c")));
}

TEST_CASE("pipeline: the writer reports while it waits") {
  Pipeline pipe(4);
  int ticks = 0;
  // The input ends only once the writer, waiting for it, has reported twice.
  CHECK_FALSE(pipe.next(std::chrono::milliseconds(1), [&] {
    if (++ticks == 2) pipe.close_input(0);
  }));
  CHECK(ticks == 2);
}

TEST_CASE("ahead jobs: run once, by whoever comes first; the result is taken once") {
  std::atomic<int> runs{0};
  const SampleWork counted = [&](const RawSample& r) {
    ++runs;
    return fake_work(r);
  };
  AheadJob job(raw("k", 40000));
  CHECK(job.bytes() == 40000);
  job.try_run(counted);  // an idle worker
  job.try_run(counted);  // a second one finds it done
  CHECK(job.take(counted).key == "k:40000");
  CHECK(runs == 1);

  AheadJob lazy(raw("m", 10));
  CHECK(lazy.take(counted).key == "m:10");  // nobody ran it ahead: run by the taker
  CHECK(runs == 2);
}

TEST_CASE("ahead jobs: a late member takes the members back; a queued job never runs") {
  std::atomic<int> runs{0};
  const SampleWork counted = [&](const RawSample& r) {
    ++runs;
    return fake_work(r);
  };
  AheadJob queued(raw("k", 100));
  const std::vector<Member> back = queued.reclaim();
  REQUIRE(back.size() == 1);
  CHECK(back[0].name == "k.bin");
  CHECK(back[0].data.size() == 100);
  queued.try_run(counted);  // a worker that finds it in the queue later
  CHECK(runs == 0);

  AheadJob ran(raw("r", 5));
  ran.try_run(counted);
  CHECK(ran.reclaim().size() == 1);  // the result is dropped, the members come back
}

TEST_CASE("ahead jobs: the work's exception reaches whoever takes the result") {
  const SampleWork failing = [](const RawSample&) -> ProcessedSample {
    throw std::runtime_error("codec plugin missing");
  };
  AheadJob job(raw("k"));
  job.try_run(failing);  // on a worker: kept, not thrown there
  CHECK_THROWS_WITH(job.take(failing), "codec plugin missing");
}

TEST_CASE("pipeline: ahead jobs go to idle workers only when no item waits") {
  Pipeline pipe(4);
  auto job = std::make_shared<AheadJob>(raw("ahead"));
  pipe.push_ahead(job);
  REQUIRE(pipe.push(item(0, "a")));
  auto first = pipe.take();
  REQUIRE(first);
  CHECK(first->item);  // the item first
  auto second = pipe.take();
  REQUIRE(second);
  CHECK_FALSE(second->item);
  CHECK(second->ahead == job);
  pipe.close_input(1);
}

TEST_CASE("pipeline threads: leaving the scope by an exception cancels and joins them") {
  Pipeline pipe(1);
  std::atomic<int> ended{0};
  try {
    PipelineThreads pool(pipe);
    for (int i = 0; i < 3; ++i)
      pool.start([&] {
        while (pipe.take()) {
        }
        ++ended;
      });
    throw std::runtime_error("disk full");  // the writer failing while workers wait
  } catch (const std::runtime_error&) {
  }
  CHECK(ended == 3);  // all joined; std::terminate was not called
}

TEST_CASE("workers: the work's exception stops the run, kept for the caller") {
  Pipeline pipe(8);
  WorkerStats stats;
  const SampleWork failing = [](const RawSample& r) -> ProcessedSample {
    if (r.key == "3") throw std::runtime_error("encoder failed");
    return fake_work(r);
  };
  {
    PipelineThreads pool(pipe);
    for (int i = 0; i < 2; ++i) pool.start([&] { run_worker(pipe, failing, stats); });
    for (uint64_t k = 0; k < 6; ++k)
      if (!pipe.push(item(k, std::to_string(k)))) break;
    pipe.close_input(6);
    while (pipe.next(std::chrono::milliseconds(5), [] {})) {
    }
    pool.join();
  }
  REQUIRE(stats.failure);
  CHECK_THROWS_WITH(std::rethrow_exception(stats.failure), "encoder failed");
  CHECK(stats.seconds > 0);
}

TEST_CASE("pipeline: stop_input ends the input where it is; what was pushed is still written") {
  Pipeline pipe(4);
  std::atomic<uint64_t> pushed{0};
  std::atomic<bool> refused{false};
  // An endless reader, blocked for room most of the time: only the stop ends it.
  std::thread reader([&] {
    for (uint64_t k = 0;; ++k) {
      if (!pipe.push(item(k, std::to_string(k)))) {
        refused = true;
        break;
      }
      ++pushed;
    }
    pipe.close_input(pushed);  // after a stop: ignored
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w)
    workers.emplace_back([&] {
      while (auto work = pipe.take()) {
        Item& it = *work->item;
        for (Entry& e : it.entries) e.done = fake_work(e.raw);
        pipe.finish(std::move(it));
      }
    });
  uint64_t written = 0;
  bool in_order = true;
  while (auto it = pipe.next(std::chrono::milliseconds(50), [] {})) {
    in_order &= it->seq == written && it->entries.at(0).done.has_value();
    if (++written == 10) pipe.stop_input();  // a signal after ten items
  }
  reader.join();
  for (auto& w : workers) w.join();
  CHECK(in_order);
  CHECK(pipe.input_stopped());
  CHECK(refused);
  // Everything the reader managed to push came out: ten, plus up to the in-flight limit.
  CHECK(written == pushed);
  CHECK(written >= 10);
  CHECK(written <= 10 + 4);
}

TEST_CASE("pipeline: stop_input after the input ended changes nothing") {
  Pipeline pipe(4);
  REQUIRE(pipe.push(item(0, "a")));
  pipe.close_input(1);
  pipe.stop_input();
  CHECK_FALSE(pipe.input_stopped());
  auto w = pipe.take();
  REQUIRE(w);
  pipe.finish(std::move(*w->item));
  CHECK(pipe.next(std::chrono::milliseconds(10), [] {}));
  CHECK_FALSE(pipe.next(std::chrono::milliseconds(10), [] {}));
}
