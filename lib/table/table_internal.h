#pragma once
// Helpers the per-format readers share: columns from per-row values, and the image column.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "labels/field_value.h"
#include "table/table.h"

namespace tarmac::detail {

/// A column from one value per row: uniform (one buffer) when every row is a non-null
/// numeric tensor of one dtype and shape, else the values as they are.
TableColumn make_column(std::string name, std::vector<FieldValue> values);

/// Builds one column row by row, keeping rows in one buffer while every row is a non-null
/// numeric tensor of one dtype and shape, and spilling to one FieldValue per row once one is
/// not (a table of 250k COCO annotations then costs its numbers, not 250k small vectors).
class ColumnBuilder {
 public:
  explicit ColumnBuilder(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  uint64_t rows() const { return rows_; }
  /// Appends a numeric row of `shape` from `bytes` (little-endian, C order).
  void add_numeric(DType dtype, const std::vector<int64_t>& shape, const void* bytes, size_t size);
  void add(FieldValue value);
  /// Appends null rows until the column has `rows`.
  void pad_to(uint64_t rows);
  TableColumn finish() &&;

 private:
  void spill();
  std::string name_;
  uint64_t rows_ = 0;
  bool per_row_ = false;
  DType dtype_ = DType::F64;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> data_;
  std::vector<FieldValue> values_;
};

/// A String value holding `text`.
FieldValue string_value(std::string_view text);
/// A null value (the row has nothing for the column).
FieldValue null_value();

/// Moves the label column named `image_column` (or `default_name` when that is empty) into
/// table.member_columns[0] / member_paths[0]. Throws FatalError, naming the file, when the
/// column is missing (listing the columns there are) or a row's value is not a non-empty
/// string.
void take_image_column(Table& table, const std::string& path, const std::string& image_column,
                       const std::string& default_name);

/// "'a', 'b', 'c'" (for messages): names escaped (common/printable.h), at most 20 of them, then
/// "and N more".
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace tarmac::detail
