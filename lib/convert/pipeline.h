#pragma once
// The conversion's thread pipeline: a bounded, ordered hand-off from the reader thread to the
// transform workers and on to the writer, and the jobs that convert samples ahead of their
// release from the group window. Knows nothing of what a sample's work is (SampleWork), so it
// is tested with a fake one.
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/printable.h"
#include "common/stop.h"
#include "convert/sample_processor.h"
#include "source/input_reader.h"
#include "source/sample_grouper.h"
#include "transform/image_codec.h"

namespace tarmac {

/// What a worker does with one sample (process_sample with the run's options, in a run).
using SampleWork = std::function<ProcessedSample(const RawSample&)>;

// A sample processed ahead of its release from the group window (see the reader thread): queued
// for an idle worker, and whoever needs it first runs it. It holds the sample's members, lent by
// the grouper, until its entry is done or the reader takes them back for a late member.
class AheadJob {
 public:
  explicit AheadJob(RawSample raw) : raw_(std::move(raw)), bytes_(raw_.bytes()) {}
  uint64_t bytes() const { return bytes_; }  ///< the members' bytes, for batching
  /// Runs the job here unless another thread has claimed it (or it was reclaimed).
  void try_run(const SampleWork& work) {
    {
      const std::lock_guard lk(mu_);
      if (state_ != State::Queued) return;
      state_ = State::Running;
    }
    std::optional<ProcessedSample> result;
    std::exception_ptr error;
    try {
      result = work(raw_);
    } catch (...) {  // kept for whoever takes the result: a reclaimed job's error is never seen
      error = std::current_exception();
    }
    const std::lock_guard lk(mu_);
    result_ = std::move(result);
    error_ = error;
    state_ = State::Done;
    cv_.notify_all();
  }
  /// The result: runs the job here if nobody has started it, waits if somebody has. Once.
  ProcessedSample take(const SampleWork& work) {
    try_run(work);
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return state_ == State::Done; });
    if (error_) std::rethrow_exception(error_);
    return std::move(*result_);
  }
  /// Reader, for a member that came late: the members back, the job cancelled (or, if running,
  /// waited for and its result dropped). take() must not be called afterwards.
  std::vector<Member> reclaim() {
    std::unique_lock lk(mu_);
    if (state_ == State::Queued) state_ = State::Done;
    cv_.wait(lk, [&] { return state_ == State::Done; });
    result_.reset();
    return std::exchange(raw_.members, {});
  }

 private:
  enum class State { Queued, Running, Done };
  RawSample raw_;
  const uint64_t bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::Queued;
  std::optional<ProcessedSample> result_;
  std::exception_ptr error_;
};

// A work item travelling from the reader to the workers and on to the writer.
struct Entry {
  RawSample raw;
  std::shared_ptr<AheadJob> ahead;  // processed ahead: raw holds no members, the job has them
  std::optional<ProcessedSample> done;
  std::string reader_error;  // a grouping error (late member, duplicate key)
  ErrorCode reader_error_code = ErrorCode::None;
  bool replay = false;  // handled before the checkpoint this run resumes from
  ReadMark mark;        // where the reader stood when it released the sample
};

// Samples travel in small batches, so that tiny samples (labels only) do not pay a
// hand-off between threads each; image samples still spread over all workers.
struct Item {
  uint64_t seq = 0;
  std::vector<Entry> entries;
  uint64_t bytes = 0;
};
constexpr size_t kBatchSamples = 64;
// Samples smaller than this are not converted ahead: their work (labels, a thumbnail) costs
// less than a hand-off of its own, and a window of them holds tens of thousands.
constexpr uint64_t kAheadMinBytes = 32 << 10;
constexpr uint64_t kBatchBytes = 1 << 20;

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Bounded hand-off between the reader, the workers and the ordered writer. The in-flight
// limit bounds memory: the reader blocks until the writer has retired old samples.
class Pipeline {
 public:
  explicit Pipeline(size_t max_in_flight) : max_in_flight_(max_in_flight) {}

  /// For tests, to reach an ordering without sleeping: called each time a side starts to wait
  /// (the reader for room, a worker for work, the writer for the next item in order), under
  /// the pipeline's lock, so it must not call the pipeline. Set before the threads start.
  struct WaitHooks {
    std::function<void()> reader, worker, writer;
  };
  void set_wait_hooks(WaitHooks hooks) { hooks_ = std::move(hooks); }

  bool push(Item&& it) {  // reader
    std::unique_lock lk(mu_);
    const auto t = Clock::now();
    if (hooks_.reader && !(in_flight_ < max_in_flight_ || cancelled_ || stopped_)) hooks_.reader();
    cv_space_.wait(lk, [&] { return in_flight_ < max_in_flight_ || cancelled_ || stopped_; });
    waits_.reader += seconds_since(t);
    if (cancelled_ || stopped_) return false;
    ++in_flight_;
    ++pushed_;
    todo_.push_back(std::move(it));
    cv_todo_.notify_one();
    return true;
  }
  void close_input(uint64_t total) {  // reader, at the end
    std::lock_guard lk(mu_);
    if (stopped_) return;
    total_ = total;
    ahead_.clear();  // every job still needed travels with its entry
    cv_todo_.notify_all();
    cv_done_.notify_all();
  }
  void push_ahead(std::shared_ptr<AheadJob> job) {  // reader; bounded by the group window
    const std::lock_guard lk(mu_);
    ahead_.push_back(std::move(job));
    cv_todo_.notify_one();
  }
  /// Worker: the next item, else a job to process ahead; nullopt at the end.
  struct Work {
    std::optional<Item> item;
    std::shared_ptr<AheadJob> ahead;
  };
  std::optional<Work> take() {
    std::unique_lock lk(mu_);
    const auto t = Clock::now();
    const auto ready = [&] { return !todo_.empty() || !ahead_.empty() || total_ || cancelled_; };
    if (hooks_.worker && !ready()) hooks_.worker();
    cv_todo_.wait(lk, ready);
    waits_.workers += seconds_since(t);
    if (cancelled_) return std::nullopt;
    Work w;
    if (!todo_.empty()) {
      w.item = std::move(todo_.front());
      todo_.pop_front();
    } else if (!ahead_.empty()) {
      w.ahead = std::move(ahead_.front());
      ahead_.pop_front();
    } else {
      return std::nullopt;
    }
    return w;
  }
  void finish(Item&& it) {  // worker
    std::lock_guard lk(mu_);
    const uint64_t seq = it.seq;
    done_.emplace(seq, std::move(it));
    if (seq == next_) cv_done_.notify_all();
  }
  /// Writer: the next item in order; nullopt at the end. Wakes up every `tick` to report.
  std::optional<Item> next(std::chrono::milliseconds tick, const std::function<void()>& on_tick) {
    std::unique_lock lk(mu_);
    while (true) {
      if (cancelled_) return std::nullopt;
      auto it = done_.find(next_);
      if (it != done_.end()) {
        Item item = std::move(it->second);
        done_.erase(it);
        ++next_;
        --in_flight_;
        cv_space_.notify_one();
        return item;
      }
      if (total_ && next_ == *total_) return std::nullopt;
      const auto t = Clock::now();
      if (hooks_.writer) hooks_.writer();
      const auto woke = cv_done_.wait_for(lk, tick);
      waits_.writer += seconds_since(t);
      if (woke == std::cv_status::timeout) {
        lk.unlock();
        on_tick();
        lk.lock();
      }
    }
  }
  /// Seconds each side spent blocked: the reader for room, the workers (summed) for work, the
  /// writer for the next sample in order.
  struct Waits {
    double reader = 0, workers = 0, writer = 0;
  };
  Waits waits() {
    std::lock_guard lk(mu_);
    return waits_;
  }
  /// A graceful stop: the input ends where it is. What was pushed is still processed and handed
  /// to the writer in order, then next() ends; the reader's later pushes return false.
  void stop_input() {
    std::lock_guard lk(mu_);
    if (total_) return;  // the input had ended anyway
    stopped_ = true;
    total_ = pushed_;
    ahead_.clear();
    cv_space_.notify_all();
    cv_todo_.notify_all();
    cv_done_.notify_all();
  }
  /// True after stop_input() (the reader's pushes refused). Any thread.
  bool input_stopped() const { return stopped_.load(std::memory_order_relaxed); }
  void cancel() {
    std::lock_guard lk(mu_);
    cancelled_ = true;
    cv_space_.notify_all();
    cv_todo_.notify_all();
    cv_done_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_space_, cv_todo_, cv_done_;
  std::deque<Item> todo_;
  std::deque<std::shared_ptr<AheadJob>> ahead_;
  std::map<uint64_t, Item> done_;
  size_t max_in_flight_;
  size_t in_flight_ = 0;
  uint64_t next_ = 0;
  std::optional<uint64_t> total_;
  uint64_t pushed_ = 0;
  bool cancelled_ = false;
  std::atomic<bool> stopped_{false};
  Waits waits_;
  WaitHooks hooks_;
};

/// A pipeline's threads, joined whatever happens: leaving the scope without join() (an
/// exception) cancels the pipeline, so that no thread waits forever, and joins them; no
/// exception path ends in std::terminate.
class PipelineThreads {
 public:
  explicit PipelineThreads(Pipeline& pipe) : pipe_(pipe) {}
  ~PipelineThreads() {
    if (threads_.empty()) return;
    pipe_.cancel();
    join();
  }
  PipelineThreads(const PipelineThreads&) = delete;
  PipelineThreads& operator=(const PipelineThreads&) = delete;
  template <class F>
  void start(F&& f) {
    threads_.emplace_back(std::forward<F>(f));
  }
  /// Waits for every thread to end (they end when the pipeline does).
  void join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

 private:
  Pipeline& pipe_;
  std::vector<std::thread> threads_;
};

/// What the transform workers did, summed over them.
struct WorkerStats {
  std::mutex mu;
  std::exception_ptr failure;  ///< the first exception a worker's work threw (the run stops)
  double seconds = 0;          ///< start to end, summed
  std::atomic<uint64_t> ahead_taken{0};
};

/// "the conversion of sample 'KEY' (a 20000x20000 PNG, 1.2 MiB)": what a worker busy with the
/// RawSample `raw` points to is doing, for the stop watchdog's message (StopRequest::Describe).
inline std::string describe_sample_work(const void* raw) {
  const auto& r = *static_cast<const RawSample*>(raw);
  std::string text = "the conversion of sample '" + printable(r.key) + "'";
  for (const Member& m : r.members) {
    try {
      const ImageHeader h = probe_image(m.data);
      if (h.width <= 0 || h.height <= 0) continue;
      std::string format = image_format_extension(h.format);
      for (char& c : format) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return text + " (a " + std::to_string(h.width) + "x" + std::to_string(h.height) + " " +
             format + ", " + format_bytes(m.data.size()) + ")";
    } catch (const std::exception&) {  // no image, or packed (a zip member): not described
    }
  }
  return text;
}

/// A transform worker: takes items (and, when idle, jobs ahead) until the pipeline ends, runs
/// `work` on every sample to convert, and hands the items on in order. What `work` throws
/// stops the run (kept in `stats`, the pipeline cancelled), never std::terminate. `stop`, if
/// given, is told which sample the worker converts (StopRequest::begin_busy): a stop cannot
/// interrupt an encode, and the watchdog that ends it names what it cut short.
inline void run_worker(Pipeline& pipe, const SampleWork& sample_work, WorkerStats& stats,
                       const StopRequest* stop = nullptr) {
  const SampleWork marked = [&](const RawSample& raw) {
    stop->begin_busy(&raw, describe_sample_work);
    struct End {
      const StopRequest* stop;
      ~End() { stop->end_busy(); }
    } end{stop};
    return sample_work(raw);
  };
  const SampleWork& work = stop ? marked : sample_work;
  const auto t0 = Clock::now();
  try {
    while (auto w = pipe.take()) {
      if (w->ahead) {
        w->ahead->try_run(work);
        continue;
      }
      Item& it = *w->item;
      for (Entry& e : it.entries) {
        if (e.ahead) {
          e.done = e.ahead->take(work);
          stats.ahead_taken.fetch_add(1, std::memory_order_relaxed);
        } else if (e.reader_error.empty() && !e.replay && !e.raw.dropped) {
          e.done = work(e.raw);
        }
        e.ahead.reset();
        e.raw.members = {};  // the bytes are no longer needed; key and input are
      }
      pipe.finish(std::move(it));
    }
  } catch (...) {
    {
      const std::lock_guard lk(stats.mu);
      if (!stats.failure) stats.failure = std::current_exception();
    }
    pipe.cancel();
  }
  const std::lock_guard lk(stats.mu);
  stats.seconds += seconds_since(t0);
}

}  // namespace tarmac
