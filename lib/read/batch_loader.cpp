#include "read/batch_loader.h"

#include <cstring>
#include <stdexcept>
#include <utility>

namespace tarmac {

BatchLoader::BatchLoader(const Dataset& ds, BatchOptions options)
    : ds_(ds), opt_(std::move(options)) {
  if (opt_.width < 0 || opt_.height < 0 || (opt_.width == 0) != (opt_.height == 0))
    throw ArgumentError("batch image size must be positive (or 0x0 for no images)");
  if (opt_.channels != 1 && opt_.channels != 3)
    throw ArgumentError("batch channels must be 1 or 3");
  if (opt_.width > 0 && !ds.has_images())
    throw ArgumentError("dataset '" + ds.path() + "' has no images to batch");
  for (const std::string& name : opt_.fields) {
    const FieldSpec* f = ds.find_field(name);
    if (!f) throw ArgumentError("dataset '" + ds.path() + "' has no field '" + name + "'");
    if (f->ragged)
      throw ArgumentError("field '" + name +
                                  "' is ragged; only fixed-shape fields can be batched");
    fields_.push_back(f);
  }
  unsigned n =
      opt_.threads > 0 ? unsigned(opt_.threads) : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned k = 0; k < n; ++k) threads_.emplace_back([this] { work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchLoader::start(std::vector<int64_t> indices, BatchBuffers out) {
  const size_t n = indices.size();
  const size_t image_bytes = size_t(opt_.width) * size_t(opt_.height) * size_t(opt_.channels);
  if (out.images.size() != n * image_bytes)
    throw ArgumentError("batch image buffer holds " + std::to_string(out.images.size()) +
                                " bytes, " + std::to_string(n * image_bytes) + " needed");
  if (out.labels.size() != fields_.size())
    throw ArgumentError("batch needs one label buffer per field");
  for (size_t k = 0; k < fields_.size(); ++k)
    if (out.labels[k].size() != n * fields_[k]->sample_bytes())
      throw ArgumentError("batch buffer of field '" + fields_[k]->name + "' holds " +
                                  std::to_string(out.labels[k].size()) + " bytes, " +
                                  std::to_string(n * fields_[k]->sample_bytes()) + " needed");
  for (int64_t i : indices)
    if (i < 0 || uint64_t(i) >= ds_.size())
      throw IndexError("batch index " + std::to_string(i) + " is out of range for " +
                              std::to_string(ds_.size()) + " samples");
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return !busy_; });
  indices_ = std::move(indices);
  out_ = std::move(out);
  next_ = finished_ = 0;
  error_ = nullptr;
  busy_ = n > 0;
  ++generation_;
  lock.unlock();
  wake_.notify_all();
}

void BatchLoader::wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void BatchLoader::load(std::vector<int64_t> indices, BatchBuffers out) {
  start(std::move(indices), std::move(out));
  wait();
}

void BatchLoader::do_sample(size_t j) {
  const auto i = static_cast<size_t>(indices_[j]);
  if (opt_.width > 0) {
    const size_t bytes = size_t(opt_.width) * size_t(opt_.height) * size_t(opt_.channels);
    ds_.decode_into(i, out_.images.subspan(j * bytes, bytes), opt_.width, opt_.height, opt_.resize,
                    opt_.channels);
  }
  for (size_t k = 0; k < fields_.size(); ++k) {
    const TensorView v = ds_.value(fields_[k]->name, i);
    std::memcpy(out_.labels[k].data() + j * v.bytes.size(), v.bytes.data(), v.bytes.size());
  }
}

void BatchLoader::work() {
  uint64_t seen = 0;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock,
               [&] { return stop_ || (busy_ && generation_ != seen && next_ < indices_.size()); });
    if (stop_) return;
    // Take samples one at a time until the batch is handed out; decoding runs unlocked.
    while (next_ < indices_.size()) {
      const size_t j = next_++;
      lock.unlock();
      std::exception_ptr err;
      try {
        do_sample(j);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (++finished_ == indices_.size()) {
        busy_ = false;
        done_.notify_all();
      }
    }
    seen = generation_;
  }
}

}  // namespace tarmac
