#pragma once
// Label columns of a run, spilled to disk sample by sample so that memory stays bounded
// whatever the number of samples, then assembled into the annotation file at the end.
// A column's records: tag (u8: dtype | kind << 5, or 0xFF for a sample without a value), ndim
// (u8), dims (i64 each), byte count (u64), bytes. Records keep the dtype and kind they were
// parsed with; conversion to the column's final dtype (or, for a column that fell back to JSON
// text, to each value's JSON text) happens once, when the annotation file is written.
// Every column of a run shares ONE spill file (a table of a million columns must not need a
// million open files): a column buffers its records in memory and moves them to the file as
// chunks (u32 column, u32 records, u64 bytes, then the records) when its buffer is full, when
// all buffers together pass a budget, and at a checkpoint. A column remembers where its chunks
// are; a resumed run finds them again by reading the chunk headers.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/dtype.h"
#include "format/field_spec.h"
#include "write/safetensors_writer.h"

namespace tarmac {

/// Converts `count` elements from `src` (of type `from`) to type `to`, appending to `out`.
void convert_elements(DType from, const uint8_t* src, uint64_t count, DType to,
                      std::vector<uint8_t>& out);

class ColumnStore;

/// One column of a ColumnStore. Its tensors read it back while the store lives.
class SpillColumn {
 public:
  SpillColumn(const SpillColumn&) = delete;
  SpillColumn& operator=(const SpillColumn&) = delete;

  /// Appends one sample's value. Throws FatalError on I/O failure.
  void append(DType dtype, std::span<const int64_t> shape, std::span<const uint8_t> bytes,
              FieldKind kind = FieldKind::Numeric);
  /// Appends a sample without a value (a nullable field's null).
  void append_missing();

  /// Tensors for a column of fixed per-sample shape: NAME [N, shape...] of dtype `to`; a
  /// sample without a value holds zeros. Call after ColumnStore::finish().
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
  /// The bytes of every value's JSON text (call after ColumnStore::finish()).
  uint64_t json_text_bytes() const;

  const std::string& name() const { return name_; }
  uint64_t count() const { return count_; }

 private:
  friend class ColumnStore;
  class Reader;
  /// Where one chunk's records lie in the spill file.
  struct Chunk {
    uint64_t offset = 0, bytes = 0;
  };
  SpillColumn(ColumnStore& store, uint32_t id, std::string name)
      : store_(&store), id_(id), name_(std::move(name)) {}
  void appended(size_t capacity_before);
  /// Streams every record's elements, converted to `to`, to a sink: the column's values.
  std::function<void(ByteSink&)> values_filler(DType to, uint64_t missing_bytes,
                                               bool as_json) const;
  /// Moves the buffered records to the store's file as one chunk; `release` frees the buffer.
  void spill(bool release);

  ColumnStore* store_;
  uint32_t id_;
  std::string name_;
  std::vector<uint8_t> buffer_;  // records not yet in a chunk
  std::vector<Chunk> chunks_;
  uint64_t count_ = 0;
  uint64_t buffered_records_ = 0;  // of count_, those in buffer_
};

/// The spill file of a run and its columns.
class ColumnStore {
 public:
  /// Creates (or truncates) the spill file.
  explicit ColumnStore(std::string path);
  /// Reopens the spill file of an interrupted run cut back to `bytes` (a checkpoint's) and
  /// finds its chunks; add the columns again, in the same order, then check_records().
  /// Throws FatalError when the file is missing, shorter than `bytes` or not a spill file.
  ColumnStore(std::string path, uint64_t bytes);
  ~ColumnStore();
  ColumnStore(const ColumnStore&) = delete;
  ColumnStore& operator=(const ColumnStore&) = delete;

  /// The next column (columns are numbered in the order they are added); valid while the store
  /// lives.
  SpillColumn& add(std::string name);
  /// Throws FatalError unless every column holds `records` records and the file holds no
  /// records of a column not added (a resumed run's columns are the checkpoint's).
  void check_records(uint64_t records) const;
  /// Moves every column's records to the file and fdatasyncs it; returns its length, where a
  /// resumed run goes on from. Throws FatalError.
  uint64_t checkpoint();
  /// Writes what is buffered for the file, so that the columns' tensors can read it; nothing
  /// is appended after. Throws FatalError.
  void finish();

  const std::string& path() const { return path_; }
  size_t columns() const { return columns_.size(); }
  /// Records kept in memory by all columns together before they are moved to the file.
  static constexpr size_t kBudgetBytes = size_t{64} << 20;
  /// A column's records are moved to the file once it holds this many bytes.
  static constexpr size_t kChunkBytes = size_t{1} << 20;

 private:
  friend class SpillColumn;
  /// Appends one chunk; returns where its records start.
  uint64_t write_chunk(uint32_t column, uint64_t records, std::span<const uint8_t> bytes);
  void flush();
  void spill_all(bool release);
  void find_chunks(uint64_t bytes);

  std::string path_;
  int fd_ = -1;               // for appending
  int read_fd_ = -1;          // for reading chunks back
  std::vector<uint8_t> out_;  // bytes for the file, not yet written
  uint64_t length_ = 0;       // of the file, out_ included
  size_t held_ = 0;           // the columns' buffers' capacities
  std::vector<std::unique_ptr<SpillColumn>> columns_;
  // A resumed store: the chunks and records the file holds of each column not yet added.
  struct Found {
    std::vector<SpillColumn::Chunk> chunks;
    uint64_t records = 0;
  };
  std::unordered_map<uint32_t, Found> found_;
};

}  // namespace tarmac
