#pragma once
// Decodes batches of samples with a thread pool into caller-provided contiguous buffers:
// images into one NHWC uint8 RGB array, fixed-shape label fields into one array each. One
// batch can be in flight while the caller consumes the previous one (start / wait).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "read/dataset.h"

namespace tarmac {

struct BatchOptions {
  int width = 0;  ///< every image of a batch is width x height; 0 with height 0: no images
  int height = 0;
  /// Images of another size are resized (area when shrinking, bilinear otherwise) when
  /// true; when false (the default) they are a DataError, since label coordinates would
  /// no longer match the pixels.
  bool resize = false;
  int threads = 0;  ///< decoding threads; 0: the number of cores
  /// Fixed-shape fields to gather (schema fields or "__affine__"); ragged ones are refused.
  std::vector<std::string> fields;
  /// Channels of every image in the batch, whatever is stored: 3 (RGB; grey images
  /// replicated) or 1 (grey; colour images converted with OpenCV's weights).
  int channels = 3;
};

/// Where one batch goes. `images` holds indices.size()*height*width*channels bytes; labels[k]
/// holds indices.size()*fields[k].sample_bytes bytes. The caller keeps them alive until
/// wait() returns.
struct BatchBuffers {
  std::span<uint8_t> images;
  std::vector<std::span<uint8_t>> labels;
};

/// A pool of decoding threads bound to one Dataset, which must outlive it. Not fork-safe:
/// a child process must make its own loader (the Dataset itself is fine after fork).
class BatchLoader {
 public:
  /// Throws ArgumentError for an unknown or ragged field or a bad size.
  BatchLoader(const Dataset& ds, BatchOptions options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  /// Starts loading `indices` into `out` in the background and returns at once. Waits for
  /// the batch in flight first. Throws ArgumentError for wrong buffer sizes and
  /// IndexError for an index >= size() before anything starts.
  void start(std::vector<int64_t> indices, BatchBuffers out);
  /// Waits for the batch in flight; rethrows the first error of any sample (DataError...).
  void wait();
  /// start() then wait().
  void load(std::vector<int64_t> indices, BatchBuffers out);

  const BatchOptions& options() const { return opt_; }
  /// Bytes of one sample's value of fields[k].
  uint64_t field_bytes(size_t k) const { return fields_[k]->sample_bytes(); }

 private:
  void work();
  void do_sample(size_t j);

  const Dataset& ds_;
  BatchOptions opt_;
  std::vector<const FieldSpec*> fields_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  bool busy_ = false;
  uint64_t generation_ = 0;
  std::vector<int64_t> indices_;
  BatchBuffers out_;
  size_t next_ = 0, finished_ = 0;
  std::exception_ptr error_;
};

}  // namespace tarmac
