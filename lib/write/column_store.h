#pragma once
// Label columns of a run, spilled to disk sample by sample so that memory stays bounded
// whatever the number of samples, then assembled into the annotation file at the end.
// Each column's spill file is a sequence of records: tag (u8: dtype | kind << 5, or 0xFF for a
// sample without a value), ndim (u8), dims (i64 each), byte count (u64), bytes. Records keep
// the dtype and kind they were parsed with; conversion to the column's final dtype (or, for a
// column that fell back to JSON text, to each value's JSON text) happens once, when the
// annotation file is written.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "format/field_spec.h"
#include "write/safetensors_writer.h"

namespace tarmac {

/// Converts `count` elements from `src` (of type `from`) to type `to`, appending to `out`.
void convert_elements(DType from, const uint8_t* src, uint64_t count, DType to,
                      std::vector<uint8_t>& out);

class SpillColumn {
 public:
  /// Where a column stood at a checkpoint: spill-file bytes and records.
  struct Mark {
    uint64_t bytes = 0, count = 0;
  };

  /// Creates (or truncates) the spill file.
  SpillColumn(std::string name, std::string path);
  /// Reopens the spill file of an interrupted run, cut back to `at` (convert --resume).
  /// Throws FatalError when the file is missing or shorter than `at`.
  SpillColumn(std::string name, std::string path, Mark at);
  ~SpillColumn();
  SpillColumn(const SpillColumn&) = delete;
  SpillColumn& operator=(const SpillColumn&) = delete;

  /// Appends one sample's value. Throws FatalError on I/O failure.
  void append(DType dtype, std::span<const int64_t> shape, std::span<const uint8_t> bytes,
              FieldKind kind = FieldKind::Numeric);
  /// Appends a sample without a value (a nullable field's null).
  void append_missing();
  /// Flushes and closes the spill file (before the tensors are produced).
  void close();
  /// Flushes and fdatasyncs the spill file; returns the position to resume from.
  Mark checkpoint();

  /// Tensors for a column of fixed per-sample shape: NAME [N, shape...] of dtype `to`; a
  /// sample without a value holds zeros.
  TensorSpec fixed_tensor(DType to, std::vector<int64_t> sample_shape, uint64_t n) const;
  /// NAME.values [total_first_axis, inner...] and NAME.offsets [N + 1] (I64, in units of
  /// the first axis); a sample without a value has no rows. With `as_json`, every value is
  /// its JSON text (values U8; numbers and text rendered, JSON kept): a column that fell back
  /// to JSON text, whose total_first_axis json_text_bytes() counts.
  std::vector<TensorSpec> ragged_tensors(DType to, std::vector<int64_t> inner_shape,
                                         uint64_t total_first_axis, uint64_t n,
                                         bool as_json = false) const;
  /// NAME.valid [N] BOOL: 1 where the sample has a value.
  TensorSpec valid_tensor(uint64_t n) const;
  /// The bytes of every value's JSON text (call after close()).
  uint64_t json_text_bytes() const;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  uint64_t count() const { return count_; }

 private:
  void flush();
  std::string name_;
  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
  uint64_t count_ = 0;
  uint64_t flushed_ = 0;  // bytes in the file
};

}  // namespace tarmac
