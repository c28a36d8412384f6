#pragma once
// A derived column (docs/format.md 9) opened for training: DIR/columns/NAME.safetensors mapped,
// its layout checked and its binding to the dataset checked (the annotation file's CRC-32 and
// sample count) in constant time; each sample's output read zero-copy. The bytes' CRC-32s are
// `tarmac verify`'s business.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "read/dataset.h"

namespace tarmac {

class DerivedColumn {
 public:
  /// Opens `path` as column `name` of a dataset of `num_samples` samples whose annotation file
  /// has CRC-32 `labels_crc32`. Throws FatalError (unreadable), ParseError (not a column file)
  /// or DataError (computed from another version of the dataset), each naming the file.
  DerivedColumn(const std::string& path, const std::string& name, uint64_t num_samples,
                const std::string& labels_crc32);
  ~DerivedColumn();
  DerivedColumn(DerivedColumn&&) noexcept;
  DerivedColumn& operator=(DerivedColumn&&) noexcept;

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  /// Dimensions of one sample's output.
  size_t ndim() const { return ndim_; }
  /// True when every output has one shape (then values() is [N, ...]).
  bool uniform() const { return uniform_; }
  /// Sample i's output, shaped. Throws IndexError, DataError for offsets or a shape that
  /// disagree.
  TensorView value(size_t i) const;
  /// Every output: [N, ...] when uniform, else the flat [E] values.
  TensorView values() const;
  /// Element offsets [N + 1] and shapes [N * ndim] (row-major [N, ndim]).
  std::span<const int64_t> offsets() const { return offsets_; }
  std::span<const int64_t> shapes() const { return shapes_; }

 private:
  std::string name_, path_;
  std::unique_ptr<MappedFile> file_;
  DType dtype_ = DType::U8;
  size_t ndim_ = 0;
  bool uniform_ = false;
  uint64_t n_ = 0;
  TensorView values_;
  std::span<const int64_t> offsets_, shapes_;
};

}  // namespace tarmac
