#include "convert/convert.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "common/version.h"
#include "convert/sample_processor.h"
#include "format/layout.h"
#include "labels/schema.h"
#include "source/input_reader.h"
#include "source/key_scan.h"
#include "source/sample_grouper.h"
#include "write/column_store.h"
#include "write/file_util.h"
#include "write/manifest_file.h"
#include "write/safetensors_writer.h"
#include "write/tar_writer.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

using namespace format;

// A sample processed ahead of its release from the group window (see the reader thread): queued
// for an idle worker, and whoever needs it first runs it. It holds the sample's members, lent by
// the grouper, until its entry is done or the reader takes them back for a late member.
class AheadJob {
 public:
  explicit AheadJob(RawSample raw) : raw_(std::move(raw)), bytes_(raw_.bytes()) {}
  uint64_t bytes() const { return bytes_; }  ///< the members' bytes, for batching
  /// Runs the job here unless another thread has claimed it (or it was reclaimed).
  void try_run(const ConvertOptions& o) {
    {
      const std::lock_guard lk(mu_);
      if (state_ != State::Queued) return;
      state_ = State::Running;
    }
    std::optional<ProcessedSample> result;
    std::exception_ptr error;
    try {
      result = process_sample(raw_, o);
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
  ProcessedSample take(const ConvertOptions& o) {
    try_run(o);
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
  bool replay = false;       // handled before the checkpoint this run resumes from
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
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Bounded hand-off between the reader, the workers and the ordered writer. The in-flight
// limit bounds memory: the reader blocks until the writer has retired old samples.
class Pipeline {
 public:
  explicit Pipeline(size_t max_in_flight) : max_in_flight_(max_in_flight) {}

  bool push(Item&& it) {  // reader
    std::unique_lock lk(mu_);
    const auto t = Clock::now();
    cv_space_.wait(lk, [&] { return in_flight_ < max_in_flight_ || cancelled_; });
    waits_.reader += seconds_since(t);
    if (cancelled_) return false;
    ++in_flight_;
    todo_.push_back(std::move(it));
    cv_todo_.notify_one();
    return true;
  }
  void close_input(uint64_t total) {  // reader, at the end
    std::lock_guard lk(mu_);
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
    cv_todo_.wait(lk, [&] { return !todo_.empty() || !ahead_.empty() || total_ || cancelled_; });
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
  bool cancelled_ = false;
  Waits waits_;
};

// An append-only JSON-lines file in the staging directory (the manifest's "skipped" and
// "ignored" lists): kept on disk during the run, so that they cost no memory and survive an
// interruption together with the checkpoint.
class JsonLog {
 public:
  /// A new log, or (resume) the interrupted run's cut back to `resume_size` bytes.
  JsonLog(const fs::path& path, std::optional<uint64_t> resume_size) {
    if (resume_size)
      file_.reopen_at(path.string(), *resume_size);
    else
      file_.open(path.string());
  }
  void add(const json& j) {
    buf_ += j.dump();
    buf_ += '\n';
    if (buf_.size() >= (1 << 16)) flush();
  }
  /// Flushes and syncs; returns the size to resume from.
  uint64_t checkpoint() {
    flush();
    file_.sync();
    return file_.position();
  }
  /// Every record, in order (closes the log).
  json read_all() {
    flush();
    const std::string path = file_.path();
    file_.close();
    json all = json::array();
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) all.push_back(json::parse(line));
    if (in.bad()) throw FatalError("cannot read back '" + path + "'");
    return all;
  }

 private:
  void flush() {
    file_.write_all({reinterpret_cast<const uint8_t*>(buf_.data()), buf_.size()});
    buf_.clear();
  }
  OutputFile file_;
  std::string buf_;
};

// A column's spill file `file` in `dir`: new, or cut back to where the checkpoint being
// resumed from (`resume`, the writer's part of it; null for a fresh run) left it.
std::unique_ptr<SpillColumn> open_column(std::string name, const fs::path& dir,
                                         const std::string& file, const json* resume) {
  const std::string path = (dir / file).string();
  if (!resume) return std::make_unique<SpillColumn>(std::move(name), path);
  const json& at = resume->at("columns").at(file);
  return std::make_unique<SpillColumn>(
      std::move(name), path, SpillColumn::Mark{at.at(0).get<uint64_t>(), at.at(1).get<uint64_t>()});
}

// The blob columns of one stored kind (the image, or one dense map).
struct BlobColumns {
  std::unique_ptr<SpillColumn> shard, offset, size, crc32, width, height;
  BlobColumns(const std::string& prefix, const fs::path& dir, int index, const json* resume) {
    auto make = [&](const char* what) {
      return open_column(prefix + "." + what, dir, "blob" + std::to_string(index) + "." + what,
                         resume);
    };
    shard = make("shard");
    offset = make("offset");
    size = make("size");
    crc32 = make("crc32");
    width = make("width");
    height = make("height");
  }
  template <typename T>
  static void put(SpillColumn& c, DType t, T v) {
    c.append(t, {}, {reinterpret_cast<const uint8_t*>(&v), sizeof v});
  }
  void add(int32_t shard_index, int64_t off, const Blob& b) {
    put(*shard, DType::I32, shard_index);
    put(*offset, DType::I64, off);
    put(*size, DType::I64, static_cast<int64_t>(b.bytes.size()));
    put(*crc32, DType::U32, b.crc32);
    put(*width, DType::I32, static_cast<int32_t>(b.width));
    put(*height, DType::I32, static_cast<int32_t>(b.height));
  }
  std::vector<SpillColumn*> all() const {
    return {shard.get(), offset.get(), size.get(), crc32.get(), width.get(), height.get()};
  }
  void close_all() {
    for (auto* c : all()) c->close();
  }
  void tensors(uint64_t n, std::vector<TensorSpec>& out) const {
    out.push_back(shard->fixed_tensor(DType::I32, {}, n));
    out.push_back(offset->fixed_tensor(DType::I64, {}, n));
    out.push_back(size->fixed_tensor(DType::I64, {}, n));
    out.push_back(crc32->fixed_tensor(DType::U32, {}, n));
    out.push_back(width->fixed_tensor(DType::I32, {}, n));
    out.push_back(height->fixed_tensor(DType::I32, {}, n));
  }
};

// How the image of every sample is stored under --format.
StoredEncoding image_encoding(OutputFormat f) {
  switch (f) {
    case OutputFormat::Jpeg:
      return StoredEncoding::Jpeg;
    case OutputFormat::Png:
      return StoredEncoding::Png;
    case OutputFormat::Webp:
      return StoredEncoding::Webp;
    case OutputFormat::Raw:
      return StoredEncoding::Raw;
    case OutputFormat::Keep:
      break;
  }
  return StoredEncoding::Source;
}

// Writes samples, in order, to shards and column spill files, inside the staging directory.
// checkpoint() syncs everything written so far and describes it; a writer constructed from
// that description (convert --resume) goes on from there as if never interrupted.
class DatasetWriter {
 public:
  DatasetWriter(const ConvertOptions& o, fs::path staging, const json* resume)
      : o_(o),
        staging_(std::move(staging)),
        schema_(o.ragged),
        keys_(open_column(kKeyColumn, staging_, "key.col", resume)),
        affine_(open_column(kAffineColumn, staging_, "affine.col", resume)) {
    if (!o.no_images) {
      blobs_.emplace_back(kImageBlob, staging_, 0, resume);
      for (size_t i = 0; i < o.dense.size(); ++i)
        blobs_.emplace_back(dense_blob_kind(o.dense[i]), staging_, static_cast<int>(i + 1), resume);
    }
    if (!resume) return;
    schema_.restore(resume->at("schema").get<std::string>());
    samples_ = resume->at("samples").get<uint64_t>();
    blob_bytes_ = resume->at("blob_bytes").get<uint64_t>();
    key_bytes_ = resume->at("key_bytes").get<uint64_t>();
    shard_names_ = resume->at("shards").get<std::vector<std::string>>();
    shard_crcs_ = resume->at("shard_crcs").get<std::vector<uint32_t>>();
    shard_sizes_ = resume->at("shard_sizes").get<std::vector<uint64_t>>();
    if (!schema_.fields().empty()) open_label_columns(resume);
    if (const json& open = resume->at("open_shard"); !open.is_null())
      tar_ = std::make_unique<TarWriter>((staging_ / shard_names_.back()).string(),
                                         open.at("size").get<uint64_t>(),
                                         open.at("crc32").get<uint32_t>());
  }

  /// Syncs shards and spill files and returns what a resumed writer needs.
  json checkpoint() {
    json j;
    j["samples"] = samples_;
    j["blob_bytes"] = blob_bytes_;
    j["key_bytes"] = key_bytes_;
    j["shards"] = shard_names_;
    j["shard_crcs"] = shard_crcs_;
    j["shard_sizes"] = shard_sizes_;
    if (tar_) {
      tar_->sync();
      j["open_shard"] = {{"size", tar_->size()}, {"crc32", tar_->crc32()}};
    } else {
      j["open_shard"] = nullptr;
    }
    json cols = json::object();
    auto mark = [&](SpillColumn& c) {
      const SpillColumn::Mark m = c.checkpoint();
      cols[fs::path(c.path()).filename().string()] = {m.bytes, m.count};
    };
    mark(*keys_);
    mark(*affine_);
    for (auto& b : blobs_)
      for (SpillColumn* c : b.all()) mark(*c);
    for (auto& c : label_cols_) mark(*c);
    j["columns"] = cols;
    j["schema"] = schema_.checkpoint();
    return j;
  }

  /// True once after each shard is closed: a natural point for a checkpoint.
  bool take_shard_closed() { return std::exchange(shard_closed_, false); }

  /// Checks the sample against the schema and stores it. Throws SampleError (nothing stored).
  void add(ProcessedSample& s) {
    schema_.observe(s.fields);
    if (label_cols_.empty()) open_label_columns(nullptr);
    key_bytes_ += s.key.size();
    keys_->append(DType::U8, std::vector<int64_t>{static_cast<int64_t>(s.key.size())},
                  {reinterpret_cast<const uint8_t*>(s.key.data()), s.key.size()});
    for (const auto& f : s.fields) {
      size_t idx = 0;
      while (schema_.fields()[idx].name != f.name) ++idx;
      label_cols_[idx]->append(f.value.dtype, f.value.shape, f.value.data);
    }
    if (!o_.no_images) {
      affine_->append(DType::F64, std::vector<int64_t>{2, 3},
                      {reinterpret_cast<const uint8_t*>(s.affine.data()), sizeof(double) * 6});
      write_blobs(s);
    }
    ++samples_;
  }

  /// Closes the last shard and writes the annotation file; returns its path.
  fs::path finish(const std::string& tool) {
    if (tar_) close_shard();
    keys_->close();
    affine_->close();
    for (auto& b : blobs_) b.close_all();
    for (auto& c : label_cols_) c->close();
    const uint64_t n = samples_;
    std::vector<TensorSpec> t;
    t.push_back(keys_->ragged_tensors(DType::U8, {}, key_bytes_, n)[0]);
    t.push_back(keys_->ragged_tensors(DType::U8, {}, key_bytes_, n)[1]);
    if (!o_.no_images) {
      t.push_back(affine_->fixed_tensor(DType::F64, {2, 3}, n));
      for (const auto& b : blobs_) b.tensors(n, t);
    }
    for (size_t i = 0; i < label_cols_.size(); ++i) {
      const FieldSchema& f = schema_.fields()[i];
      if (f.ragged) {
        std::vector<int64_t> inner(f.shape.begin() + 1, f.shape.end());
        for (auto& spec : label_cols_[i]->ragged_tensors(f.dtype, inner, f.total_first_axis, n))
          t.push_back(std::move(spec));
      } else {
        t.push_back(label_cols_[i]->fixed_tensor(f.dtype, f.shape, n));
      }
    }
    LayoutMetadata lm;
    lm.num_samples = n;
    lm.fields = schema_.specs();
    lm.shards = shard_names_;
    lm.tool = tool;
    if (!o_.no_images) {
      lm.blobs.emplace_back(kImageBlob, image_encoding(o_.format));
      // A dense map is re-encoded as PNG when transformed, else kept as the source's bytes.
      for (const auto& d : o_.dense)
        lm.blobs.emplace_back(dense_blob_kind(d), StoredEncoding::Source);
    }
    const std::map<std::string, std::string> meta = layout_metadata(lm);
    fs::path path = staging_ / kLabelsFile;
    write_safetensors(path.string(), std::move(t), meta);
    return path;
  }

  const Schema& schema() const { return schema_; }
  const std::vector<std::string>& shard_names() const { return shard_names_; }
  /// CRC-32 of each finished shard file, in shard order.
  const std::vector<uint32_t>& shard_crcs() const { return shard_crcs_; }
  uint64_t samples() const { return samples_; }
  uint64_t blob_bytes() const { return blob_bytes_; }

 private:
  void open_label_columns(const json* resume) {
    for (size_t i = 0; i < schema_.fields().size(); ++i)
      label_cols_.push_back(open_column(schema_.fields()[i].name, staging_,
                                        "field" + std::to_string(i) + ".col", resume));
  }

  void close_shard() {
    tar_->finish();
    shard_crcs_.push_back(tar_->crc32());
    shard_sizes_.push_back(tar_->size());
    tar_.reset();
    shard_closed_ = true;
  }

  void write_blobs(const ProcessedSample& s) {
    std::vector<std::pair<std::string, const Blob*>> items;
    items.emplace_back(s.key + "." + s.image.member_suffix, &s.image);
    for (const auto& d : s.dense) items.emplace_back(s.key + "." + d.member_suffix, &d);
    if (tar_) {
      uint64_t need = 0;
      for (const auto& [name, b] : items) need += tar_->bytes_if_added(name, b->bytes.size());
      if (tar_->size() > 0 && tar_->size() + need + 1024 > o_.shard_size) close_shard();
    }
    if (!tar_) {
      shard_names_.push_back(shard_name(shard_names_.size()));
      tar_ = std::make_unique<TarWriter>((staging_ / shard_names_.back()).string());
    }
    const int32_t shard = static_cast<int32_t>(shard_names_.size() - 1);
    for (size_t i = 0; i < items.size(); ++i) {
      const uint64_t off = tar_->add(items[i].first, items[i].second->bytes);
      blobs_[i].add(shard, static_cast<int64_t>(off), *items[i].second);
      blob_bytes_ += items[i].second->bytes.size();
    }
  }

  const ConvertOptions& o_;
  fs::path staging_;
  Schema schema_;
  std::unique_ptr<SpillColumn> keys_, affine_;
  std::vector<BlobColumns> blobs_;
  std::vector<std::unique_ptr<SpillColumn>> label_cols_;
  std::unique_ptr<TarWriter> tar_;
  std::vector<std::string> shard_names_;
  std::vector<uint32_t> shard_crcs_;
  std::vector<uint64_t> shard_sizes_;  // of the closed shards, for checkpoints
  uint64_t samples_ = 0;
  uint64_t blob_bytes_ = 0;
  uint64_t key_bytes_ = 0;
  bool shard_closed_ = false;
};

json load_checkpoint(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    json cp = json::parse(text.str());
    if (cp.at("tarmac_checkpoint").get<int>() != 1) throw FatalError("unknown version");
    return cp;
  } catch (const std::exception& e) {
    throw FatalError("cannot resume from '" + path.string() + "': " + e.what() +
                     "; run again without --resume");
  }
}

// Gets the output directory ready. Returns the checkpoint to resume from (--resume, when an
// interrupted run left one), with every file the checkpoint names back in the staging
// directory; sets `complete` when --resume finds a finished dataset and nothing to do.
std::optional<json> prepare_output(const ConvertOptions& o, const fs::path& out,
                                   const fs::path& staging, bool& complete) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec))
      throw FatalError("output '" + out.string() + "' exists and is not a directory");
    const bool has_labels = fs::exists(out / kLabelsFile, ec);
    if (o.resume && fs::exists(staging / kCheckpointFile, ec) && (!has_labels || o.overwrite)) {
      json cp = load_checkpoint(staging / kCheckpointFile);
      // Killed while publishing: the shards already moved out go back in (publish() removes
      // an old dataset's shards before it moves any new one, so these are the run's own).
      std::vector<std::string> names = cp.at("writer").at("shards").get<std::vector<std::string>>();
      for (const auto& n : names)
        if (!fs::exists(staging / n, ec) && fs::exists(out / n, ec))
          atomic_rename((out / n).string(), (staging / n).string());
      if (!has_labels) fs::remove(out / kManifestFile, ec);
      return cp;
    }
    if (o.resume && has_labels) {
      complete = true;
      return std::nullopt;
    }
    // A staging directory without the annotation file is a killed run. It may have got as far
    // as publishing some shards and the manifest: those are its files too (format.md).
    if (fs::exists(staging, ec) && !has_labels) {
      std::vector<fs::path> published{out / kManifestFile};
      for (const auto& e : fs::directory_iterator(out, ec))
        if (is_shard_name(e.path().filename().string())) published.push_back(e.path());
      for (const auto& p : published) fs::remove(p, ec);
    }
    fs::remove_all(staging, ec);  // never a dataset
    bool empty = fs::is_empty(out, ec);
    if (!empty && !o.overwrite)
      throw FatalError("output directory '" + out.string() +
                       "' is not empty; choose a new directory or pass --overwrite");
  }
  fs::create_directories(staging, ec);
  if (ec)
    throw FatalError("cannot create output directory '" + staging.string() + "': " + ec.message());
  return std::nullopt;
}

// What must not change between an interrupted run and its --resume: every option that shapes
// the output (not -j, --overwrite or --resume), the part, and each input file's size and
// modification time.
json run_fingerprint(const ConvertOptions& o, const std::vector<std::string>& inputs) {
  json opts = o.options_json.empty() ? json::object() : json::parse(o.options_json);
  for (const char* k : {"threads", "--overwrite", "--resume", "--checkpoint-every", "--output"})
    opts.erase(k);
  json ins = json::array();
  for (const auto& in : inputs) {
    json j = {{"path", in}};
    std::error_code ec;
    if (fs::is_regular_file(in, ec)) {
      j["size"] = fs::file_size(in, ec);
      j["mtime_ns"] = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               fs::last_write_time(in, ec).time_since_epoch())
                                               .count());
    }
    ins.push_back(j);
  }
  return {{"version", kVersion},
          {"options", opts},
          {"part", {o.part_index, o.part_count}},
          {"inputs", ins}};
}

// Refuses to resume a run whose options or inputs differ from the interrupted one's, naming
// the first difference; then removes from staging whatever came after the checkpoint.
void check_resumable(const json& cp, const json& now, const fs::path& staging) {
  const json& then = cp.at("run");
  std::string diff;
  if (then.at("version") != now.at("version")) {
    diff = "it was written by tarmac " + then.at("version").get<std::string>();
  } else if (then.at("part") != now.at("part")) {
    diff = "--shard differs";
  } else if (then.at("inputs").size() != now.at("inputs").size()) {
    diff = "the number of inputs differs";
  } else {
    for (size_t i = 0; i < now.at("inputs").size() && diff.empty(); ++i)
      if (then["inputs"][i] != now["inputs"][i])
        diff = "input '" + now["inputs"][i].at("path").get<std::string>() +
               "' is not the same file (path, size or modification time) as before";
    for (const auto& [k, v] : now.at("options").items())
      if (diff.empty() && (!then["options"].contains(k) || then["options"][k] != v))
        diff = "option " + k + " was " +
               (then["options"].contains(k) ? then["options"][k].dump() : "not given") + ", now " +
               v.dump();
    for (const auto& [k, v] : then.at("options").items())
      if (diff.empty() && !now["options"].contains(k))
        diff = "option " + k + " was " + v.dump() + ", now not given";
  }
  if (!diff.empty())
    throw FatalError("cannot resume the interrupted run in '" + staging.parent_path().string() +
                     "': " + diff +
                     ". Resume with the same inputs and options, or run without --resume to "
                     "start again");

  const json& w = cp.at("writer");
  const auto names = w.at("shards").get<std::vector<std::string>>();
  const auto sizes = w.at("shard_sizes").get<std::vector<uint64_t>>();
  std::error_code ec;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t have = fs::file_size(staging / names[i], ec);
    if (ec || have != sizes[i])
      throw FatalError("cannot resume: shard '" + (staging / names[i]).string() + "' " +
                       (ec ? std::string("is missing")
                           : "holds " + std::to_string(have) + " bytes, the checkpoint recorded " +
                                 std::to_string(sizes[i])) +
                       "; run again without --resume");
  }
  // Shards begun after the checkpoint, and the files of a finish that did not complete.
  for (const auto& e : fs::directory_iterator(staging, ec)) {
    const std::string n = e.path().filename().string();
    const bool listed = std::find(names.begin(), names.end(), n) != names.end();
    if ((is_shard_name(n) && !listed) || n == kLabelsFile || n == kManifestFile ||
        n.ends_with(".tmp"))
      fs::remove(e.path(), ec);
  }
}

// Moves the finished dataset from staging into place; the annotation file goes last, so its
// presence means the dataset is complete.
void publish(const fs::path& out, const fs::path& staging, const std::vector<std::string>& shards,
             bool overwrite) {
  std::error_code ec;
  if (overwrite) {
    fs::remove(out / kLabelsFile, ec);
    fs::remove(out / kManifestFile, ec);
    for (const auto& e : fs::directory_iterator(out, ec))
      if (is_shard_name(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  for (const auto& s : shards) atomic_rename((staging / s).string(), (out / s).string());
  atomic_rename((staging / kManifestFile).string(), (out / kManifestFile).string());
  atomic_rename((staging / kLabelsFile).string(), (out / kLabelsFile).string());
  fs::remove_all(staging, ec);
}

}  // namespace

PartSplit select_part(const ConvertOptions& o, std::vector<std::string>* part_inputs) {
  if (o.part_count <= 1) {
    if (part_inputs) *part_inputs = o.inputs;
    return PartSplit::None;
  }
  if (o.part_index >= o.part_count)
    throw FatalError("--shard " + std::to_string(o.part_index) + "/" +
                     std::to_string(o.part_count) +
                     ": the part index must be below the part count (parts are numbered from 0)");
  const uint64_t m = o.inputs.size(), n = o.part_count;
  if (m < n) {
    if (part_inputs) *part_inputs = o.inputs;
    return PartSplit::Samples;
  }
  if (part_inputs)
    part_inputs->assign(o.inputs.begin() + static_cast<ptrdiff_t>(o.part_index * m / n),
                        o.inputs.begin() + static_cast<ptrdiff_t>((o.part_index + 1) * m / n));
  return PartSplit::Inputs;
}

ConvertResult convert(const ConvertOptions& o,
                      const std::function<void(const Progress&)>& progress) {
  const auto t0 = Clock::now();
  if (o.format == OutputFormat::Keep &&
      (o.geometry.crop != CropMode::None || o.geometry.resize != ResizeMode::None))
    throw FatalError(
        "--format keep stores the source bytes untouched; it cannot be combined "
        "with --crop or --size");
  const fs::path out(o.output);
  const fs::path staging = out / kStagingDir;
  std::vector<std::string> part_inputs;
  const PartSplit split = select_part(o, &part_inputs);
  if (o.resume && std::find(part_inputs.begin(), part_inputs.end(), "-") != part_inputs.end())
    throw FatalError("--resume cannot be used with standard input (-): it cannot be read again");
  const json fingerprint = run_fingerprint(o, part_inputs);
  ConvertResult result;
  bool complete = false;
  std::optional<json> cp = prepare_output(o, out, staging, complete);
  if (complete) {
    result.already_complete = true;
    return result;
  }
  // Checked before the run starts, so that a refused resume keeps its checkpoint.
  if (cp) check_resumable(*cp, fingerprint, staging);
  const uint64_t resume_entries = cp ? cp->at("entries").get<uint64_t>() : 0;

  try {
    InputReaderOptions ro;
    ro.max_member_size = o.max_member_size;
    ro.skip_errors = o.skip_errors;
    InputReader reader(part_inputs, ro);
    DatasetWriter writer(o, staging, cp ? &cp->at("writer") : nullptr);
    JsonLog skipped_log(staging / "skipped.jsonl",
                        cp ? std::optional(cp->at("logs").at(0).get<uint64_t>()) : std::nullopt);
    JsonLog ignored_log(staging / "ignored.jsonl",
                        cp ? std::optional(cp->at("logs").at(1).get<uint64_t>()) : std::nullopt);
    JsonLog duplicates_log(staging / "duplicates.jsonl",
                           cp ? std::optional(cp->at("logs").at(2).get<uint64_t>()) : std::nullopt);
    if (cp) {
      result.resumed = true;
      result.resumed_samples = writer.samples();
      result.skipped_samples = cp->at("counts").at(0).get<uint64_t>();
      result.ignored_members = cp->at("counts").at(1).get<uint64_t>();
      result.duplicates = cp->at("counts").at(2).get<uint64_t>();
    }
    uint64_t entries_done = resume_entries;  // entries the writer has handled, in order
    auto last_checkpoint = Clock::now();
    const auto checkpoint_interval = std::chrono::duration<double>(o.checkpoint_seconds);
    auto write_checkpoint = [&] {
      json c;
      c["tarmac_checkpoint"] = 1;
      c["run"] = fingerprint;
      c["entries"] = entries_done;
      c["writer"] = writer.checkpoint();
      c["logs"] = {skipped_log.checkpoint(), ignored_log.checkpoint(), duplicates_log.checkpoint()};
      c["counts"] = {result.skipped_samples, result.ignored_members, result.duplicates};
      write_file_atomic((staging / kCheckpointFile).string(), c.dump());
      last_checkpoint = Clock::now();
    };
    // After each entry the writer handles: a checkpoint when a shard was closed, or when due.
    auto entry_done = [&] {
      ++entries_done;
      if (writer.take_shard_closed() || Clock::now() - last_checkpoint >= checkpoint_interval)
        write_checkpoint();
    };

    // --on-duplicate: inputs are numbered among all of o.inputs, so that a part of --shard I/N
    // by inputs keeps the sample one run over all inputs would keep. Under `last`, a pre-pass
    // over this part's inputs and all later ones finds each key's last input; under `first`,
    // a part by inputs reads the keys of the parts before it.
    GrouperOptions grouping;
    grouping.window_bytes = o.group_window;
    grouping.on_duplicate = o.on_duplicate;
    grouping.input_names = o.inputs;
    if (split == PartSplit::Inputs)
      grouping.first_input = static_cast<uint32_t>(o.part_index * o.inputs.size() / o.part_count);
    KeySet kept;
    if (o.on_duplicate == OnDuplicate::Last ||
        (o.on_duplicate == OnDuplicate::First && grouping.first_input > 0)) {
      const bool last = o.on_duplicate == OnDuplicate::Last;
      if (last && std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end())
        throw FatalError(
            "--on-duplicate last reads the inputs twice, so it cannot read standard input ('-')");
      const auto begin = o.inputs.begin() + (last ? grouping.first_input : 0);
      InputReader scan(
          std::vector<std::string>(begin, last ? o.inputs.end() : begin + grouping.first_input),
          ro);
      // Progress at most four times a second: the pre-pass reads every archive once more.
      auto last_report = Clock::now();
      const char* phase = last ? "finding each key's last input (--on-duplicate last)"
                               : "reading the keys of earlier parts (--on-duplicate first)";
      kept = scan_kept_keys(scan, o.on_duplicate, last ? grouping.first_input : 0, [&] {
        if (!progress || Clock::now() - last_report < std::chrono::milliseconds(250)) return;
        last_report = Clock::now();
        Progress p;
        p.phase = phase;
        p.bytes_read = scan.bytes_read();
        p.total_bytes = scan.total_size();
        p.seconds = seconds_since(t0);
        progress(p);
      });
      grouping.kept = &kept;
    }

    const int threads =
        o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    Pipeline pipe(static_cast<size_t>(threads) * 4 + 4);

    // Member-level notices come from the reader thread, in reader order.
    std::mutex notice_mu;
    std::vector<MemberNotice> notices;
    std::exception_ptr reader_failure;
    uint64_t entries_read = 0;  // written by the reader thread, read after it is joined
    // Written by the reader thread, read after it is joined.
    double reader_seconds = 0;
    double first_release_seconds = 0;
    std::thread reader_thread([&] {
      const auto reader_t0 = Clock::now();
      uint64_t seq = 0;
      // --shard I/N by sample: every part groups all samples and keeps its share of them.
      uint64_t sample_no = 0;
      auto in_part = [&] {
        return split != PartSplit::Samples || sample_no++ % o.part_count == o.part_index;
      };
      // Samples leave the group window for the workers only once it is full (or the input
      // ends), so at the start of a run the workers would wait for the first --group-window
      // bytes to be read. Until the first release, each sample that another key has followed
      // (its members are then probably all read) is processed ahead by idle workers, its
      // members lent by the grouper; a member that still comes for it takes them back and the
      // sample is processed when released, as usual. The output is the same either way. Not
      // when resuming or splitting by sample (those decide at release what a sample becomes).
      bool ahead_open = !cp && split != PartSplit::Samples;
      std::unordered_map<std::string, std::shared_ptr<AheadJob>> ahead;
      std::string last_key;
      try {
        SampleGrouper grouper(grouping);
        std::vector<RawSample> ready;
        Item batch;
        auto flush_batch = [&] {
          if (batch.entries.empty()) return;
          if (seq == 0) first_release_seconds = seconds_since(reader_t0);
          batch.seq = seq++;
          if (!pipe.push(std::move(batch))) throw FatalError("cancelled");
          batch = Item{};
        };
        auto add_entry = [&](Entry&& e) {
          // Resuming: what the interrupted run finished is read again (for the input
          // checksums and to group the rest) but goes no further than the writer's skip.
          if (entries_read++ < resume_entries) {
            e.replay = true;
            e.raw.members = {};
          }
          batch.bytes += e.ahead ? e.ahead->bytes() : e.raw.bytes();
          batch.entries.push_back(std::move(e));
          if (batch.entries.size() >= kBatchSamples || batch.bytes >= kBatchBytes) flush_batch();
        };
        auto push_ready = [&] {
          if (!ready.empty()) ahead_open = false;
          for (auto& r : ready) {
            if (!in_part()) continue;
            Entry e;
            if (auto j = ahead.find(r.key); j != ahead.end()) {
              e.ahead = std::move(j->second);  // unchanged since it went ahead; r has no members
              ahead.erase(j);
            }
            e.raw = std::move(r);
            add_entry(std::move(e));
          }
          ready.clear();
        };
        // After a member of `key` was added: the sample before it, followed now, goes ahead.
        auto go_ahead = [&](const std::string& key) {
          if (ahead_open && !last_key.empty() && key != last_key)
            if (const RawSample* s = grouper.find_pending(last_key);
                s && !s->dropped && s->errors.empty() && s->bytes() >= kAheadMinBytes &&
                !ahead.count(last_key)) {
              RawSample lent;
              lent.key = s->key;
              lent.input = s->input;
              lent.members = grouper.lend_members(last_key);
              auto job = std::make_shared<AheadJob>(std::move(lent));
              ahead.emplace(last_key, job);
              pipe.push_ahead(std::move(job));
            }
          last_key = key;
        };
        InputCallbacks cb;
        cb.on_member = [&](uint32_t input, Member&& m) {
          std::string key, ext;
          if (is_hidden_or_metadata(m.name) || !split_member_name(m.name, key, ext)) {
            std::lock_guard lk(notice_mu);
            notices.push_back({input, m.name,
                               is_hidden_or_metadata(m.name) ? "hidden or metadata file"
                                                             : "name has no extension, so no key",
                               false});
            return;
          }
          try {
            if (auto j = ahead.find(key); j != ahead.end()) {  // late for a sample gone ahead
              grouper.return_members(key, j->second->reclaim());
              ahead.erase(j);
              ahead_open = false;  // members are not adjacent here: going ahead would waste work
            }
            grouper.add(input, std::move(m), key, ready);
            go_ahead(key);
          } catch (const SampleError& e) {
            if (in_part()) {
              Entry bad;
              bad.raw.key = key;
              bad.raw.input = input;
              bad.reader_error = e.what();
              add_entry(std::move(bad));
            }
          }
          push_ready();
        };
        cb.on_notice = [&](MemberNotice&& n) {
          if (n.is_error && !o.skip_errors)
            throw FatalError("'" + reader.inputs()[n.input].path + "', member '" + n.member +
                             "': " + n.reason);
          std::lock_guard lk(notice_mu);
          notices.push_back(std::move(n));
        };
        cb.on_input_end = [&](uint32_t) {
          grouper.flush(ready);
          push_ready();
          flush_batch();
          last_key.clear();
        };
        reader.run(cb);
      } catch (...) {
        reader_failure = std::current_exception();
        pipe.cancel();
      }
      pipe.close_input(seq);
      reader_seconds = seconds_since(reader_t0);
    });

    // process_sample turns bad data into the sample's error; what it throws stops the run (a
    // codec plugin that cannot be loaded, an encoder failure), never std::terminate.
    std::mutex worker_failure_mu;
    std::exception_ptr worker_failure;
    double worker_seconds = 0;  // summed over the workers, under worker_failure_mu
    std::atomic<uint64_t> ahead_taken{0};
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i)
      workers.emplace_back([&] {
        const auto worker_t0 = Clock::now();
        try {
          while (auto work = pipe.take()) {
            if (work->ahead) {
              work->ahead->try_run(o);
              continue;
            }
            Item& it = *work->item;
            for (Entry& e : it.entries) {
              if (e.ahead) {
                e.done = e.ahead->take(o);
                ahead_taken.fetch_add(1, std::memory_order_relaxed);
              } else if (e.reader_error.empty() && !e.replay && !e.raw.dropped)
                e.done = process_sample(e.raw, o);
              e.ahead.reset();
              e.raw.members = {};  // the bytes are no longer needed; key and input are
            }
            pipe.finish(std::move(it));
          }
        } catch (...) {
          {
            const std::lock_guard lk(worker_failure_mu);
            if (!worker_failure) worker_failure = std::current_exception();
          }
          pipe.cancel();
        }
        const std::lock_guard lk(worker_failure_mu);
        worker_seconds += seconds_since(worker_t0);
      });

    auto report = [&](bool final) {
      if (!progress) return;
      Progress p;
      p.samples = writer.samples();
      p.skipped = result.skipped_samples;
      p.bytes_read = reader.bytes_read();
      p.total_bytes = reader.total_size();
      p.seconds = seconds_since(t0);
      p.final = final;
      progress(p);
    };

    std::exception_ptr writer_failure;
    const auto writer_t0 = Clock::now();
    try {
      while (auto item = pipe.next(std::chrono::milliseconds(250), [&] { report(false); })) {
        for (Entry& entry : item->entries) {
          if (entry.replay) continue;
          Entry* it = &entry;
          ProcessedSample* s = it->done ? &*it->done : nullptr;
          const std::string& input_path = reader.inputs()[s ? s->input : it->raw.input].path;
          for (const DuplicateNote& d : it->raw.duplicates) {
            json j = {{"input", input_path}, {"sample", it->raw.key}};
            if (!d.member.empty()) j["member"] = d.member;
            j["kept"] = o.inputs[d.kept_input];
            j["reason"] = d.reason;
            duplicates_log.add(j);
            ++result.duplicates;
          }
          if (it->raw.dropped) {
            entry_done();
            continue;
          }
          std::string error = it->reader_error;
          if (s && error.empty()) {
            error = s->error;
            for (auto& [member, why] : s->ignored) {
              ignored_log.add(
                  {{"input", reader.inputs()[s->input].path}, {"member", member}, {"reason", why}});
              ++result.ignored_members;
            }
            if (error.empty()) {
              try {
                writer.add(*s);
              } catch (const SampleError& e) {
                error = e.what();
              }
            }
          }
          if (!error.empty()) {
            const std::string key = s ? s->key : it->raw.key;
            if (!o.skip_errors)
              throw FatalError("'" + input_path + "', sample '" + key + "': " + error);
            ++result.skipped_samples;
            skipped_log.add({{"input", input_path}, {"sample", key}, {"reason", error}});
          }
          entry_done();
        }
      }
    } catch (...) {
      writer_failure = std::current_exception();
      pipe.cancel();
    }
    const double writer_seconds = seconds_since(writer_t0);
    const auto finish_t0 = Clock::now();
    reader_thread.join();
    for (auto& w : workers) w.join();
    const Pipeline::Waits waits = pipe.waits();
    result.stages.threads = threads;
    result.stages.reader_seconds = reader_seconds;
    result.stages.first_release_seconds = first_release_seconds;
    result.stages.ahead_samples = ahead_taken.load();
    result.stages.reader_blocked_seconds = waits.reader;
    result.stages.worker_seconds = worker_seconds;
    result.stages.worker_idle_seconds = waits.workers;
    result.stages.writer_seconds = writer_seconds;
    result.stages.writer_idle_seconds = waits.writer;
    if (writer_failure) std::rethrow_exception(writer_failure);
    if (worker_failure) std::rethrow_exception(worker_failure);
    if (reader_failure) std::rethrow_exception(reader_failure);
    if (entries_read < resume_entries)
      throw FatalError("cannot resume: the inputs now hold " + std::to_string(entries_read) +
                       " samples, fewer than the " + std::to_string(resume_entries) +
                       " the interrupted run had converted");
    // Everything is converted: a kill from here on resumes straight to the finish.
    write_checkpoint();

    json skipped_json = skipped_log.read_all();
    json ignored_json = ignored_log.read_all();
    json duplicates_json = duplicates_log.read_all();
    for (const auto& j : skipped_json)
      if (result.skipped.size() < 20 && j.contains("sample"))
        result.skipped.push_back({j.at("input").get<std::string>(),
                                  j.at("sample").get<std::string>(),
                                  j.at("reason").get<std::string>()});

    for (const auto& n : notices) {
      json j = {
          {"input", reader.inputs()[n.input].path}, {"member", n.member}, {"reason", n.reason}};
      if (n.is_error) {
        ++result.error_members;
        skipped_json.push_back(j);
      } else {
        ++result.ignored_members;
        ignored_json.push_back(j);
      }
    }

    // The manifest: provenance, inputs with checksums, counts, every skip with its reason.
    json manifest;
    manifest["tool"] = {{"name", "tarmac"}, {"version", kVersion}};
    manifest["command_line"] = o.command_line;
    manifest["options"] = o.options_json.empty() ? json::object() : json::parse(o.options_json);
    json inputs = json::array();
    for (const auto& in : reader.inputs()) {
      json j = {{"path", in.path},
                {"size", in.bytes_read},
                {"crc32", crc32_hex(in.crc32)},
                {"members", in.members}};
      if (!in.error.empty()) {
        j["error"] = in.error;
        result.input_errors.push_back(in.error);
        skipped_json.push_back({{"input", in.path}, {"archive", in.path}, {"reason", in.error}});
      }
      inputs.push_back(j);
      result.input_bytes += in.bytes_read;
    }
    manifest["inputs"] = inputs;
    if (cp)
      manifest["resumed"] = {{"entries", resume_entries}, {"samples", result.resumed_samples}};
    if (split != PartSplit::None)
      manifest["part"] = {{"index", o.part_index},
                          {"count", o.part_count},
                          {"split", split == PartSplit::Inputs ? "inputs" : "samples"},
                          {"all_inputs", o.inputs.size()}};

    const fs::path labels = writer.finish(std::string("tarmac ") + kVersion);
    result.samples = writer.samples();
    result.shards = writer.shard_names().size();
    result.image_bytes = writer.blob_bytes();
    result.annotation_bytes = fs::file_size(labels);
    json shards = json::array();
    for (size_t i = 0; i < writer.shard_names().size(); ++i) {
      const std::string& s = writer.shard_names()[i];
      shards.push_back({{"name", s},
                        {"size", fs::file_size(staging / s)},
                        {"crc32", crc32_hex(writer.shard_crcs()[i])}});
    }
    manifest["counts"] = {{"samples", result.samples},
                          {"skipped_samples", result.skipped_samples},
                          {"skipped_members", result.error_members},
                          {"ignored_members", result.ignored_members},
                          {"duplicates", result.duplicates},
                          {"input_errors", result.input_errors.size()},
                          {"shards", result.shards},
                          {"image_bytes", result.image_bytes}};
    manifest["shards"] = shards;
    manifest["annotation"] = {{"name", kLabelsFile}, {"size", result.annotation_bytes}};
    manifest["labels_crc32"] = crc32_hex(file_crc32(labels.string()));
    manifest["schema"] = json::parse(schema_to_json(writer.schema().specs()));
    manifest["skipped"] = skipped_json;
    manifest["ignored"] = ignored_json;
    manifest["duplicates"] = duplicates_json;
    write_file_atomic((staging / kManifestFile).string(),
                      sealed_manifest_text(std::move(manifest)));
    result.schema = writer.schema().specs();
    publish(out, staging, writer.shard_names(), o.overwrite);
    result.stages.finish_seconds = seconds_since(finish_t0);
    result.seconds = seconds_since(t0);
    report(true);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  return result;
}

}  // namespace tarmac
