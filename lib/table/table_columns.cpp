#include <cstring>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/printable.h"
#include "table/table_internal.h"

namespace tarmac::detail {

TableColumn make_column(std::string name, std::vector<FieldValue> values) {
  TableColumn column;
  column.name = std::move(name);
  bool uniform = !values.empty();
  for (const FieldValue& v : values) {
    if (v.null || v.kind != FieldKind::Numeric || v.dtype != values.front().dtype ||
        v.shape != values.front().shape) {
      uniform = false;
      break;
    }
  }
  if (!uniform) {
    column.values = std::move(values);
    return column;
  }
  column.uniform = true;
  column.dtype = values.front().dtype;
  column.row_shape = values.front().shape;
  const size_t row_bytes = values.front().data.size();
  column.data.resize(row_bytes * values.size());
  for (size_t r = 0; r < values.size(); ++r)
    if (row_bytes > 0)
      std::memcpy(column.data.data() + r * row_bytes, values[r].data.data(), row_bytes);
  return column;
}

void ColumnBuilder::add_numeric(DType dtype, const std::vector<int64_t>& shape, const void* bytes,
                                size_t size) {
  if (!per_row_ && (rows_ == 0 || (dtype == dtype_ && shape == shape_))) {
    if (rows_ == 0) {
      dtype_ = dtype;
      shape_ = shape;
    }
    const auto* p = static_cast<const uint8_t*>(bytes);
    data_.insert(data_.end(), p, p + size);
    ++rows_;
    return;
  }
  FieldValue v;
  v.kind = FieldKind::Numeric;
  v.dtype = dtype;
  v.shape = shape;
  const auto* p = static_cast<const uint8_t*>(bytes);
  v.data.assign(p, p + size);
  add(std::move(v));
}

void ColumnBuilder::add(FieldValue value) {
  if (!per_row_ && !value.null && value.kind == FieldKind::Numeric &&
      (rows_ == 0 || (value.dtype == dtype_ && value.shape == shape_))) {
    add_numeric(value.dtype, value.shape, value.data.data(), value.data.size());
    return;
  }
  spill();
  values_.push_back(std::move(value));
  ++rows_;
}

void ColumnBuilder::pad_to(uint64_t rows) {
  while (rows_ < rows) add(null_value());
}

void ColumnBuilder::spill() {
  if (per_row_) return;
  per_row_ = true;
  values_.reserve(rows_ + 1);
  const size_t row_bytes = rows_ == 0 ? 0 : data_.size() / rows_;
  for (uint64_t r = 0; r < rows_; ++r) {
    FieldValue v;
    v.kind = FieldKind::Numeric;
    v.dtype = dtype_;
    v.shape = shape_;
    v.data.assign(data_.begin() + static_cast<std::ptrdiff_t>(r * row_bytes),
                  data_.begin() + static_cast<std::ptrdiff_t>((r + 1) * row_bytes));
    values_.push_back(std::move(v));
  }
  std::vector<uint8_t>().swap(data_);
}

TableColumn ColumnBuilder::finish() && {
  TableColumn column;
  column.name = std::move(name_);
  if (per_row_ || rows_ == 0) {
    column.values = std::move(values_);
    return column;
  }
  column.uniform = true;
  column.dtype = dtype_;
  column.row_shape = std::move(shape_);
  column.data = std::move(data_);
  return column;
}

FieldValue string_value(std::string_view text) {
  FieldValue v;
  v.kind = FieldKind::String;
  v.dtype = DType::U8;
  v.shape = {static_cast<int64_t>(text.size())};
  v.data.assign(text.begin(), text.end());
  return v;
}

FieldValue null_value() {
  FieldValue v;
  v.kind = FieldKind::Json;
  v.dtype = DType::U8;
  v.null = true;
  return v;
}

std::string quoted_list(const std::vector<std::string>& names) {
  constexpr size_t kMost = 20;  // a table of 30 000 columns names 20 of them, and a count
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMost; ++i) {
    if (!out.empty()) out += ", ";
    out += "'" + printable(names[i]) + "'";
  }
  if (names.size() > kMost) out += " and " + std::to_string(names.size() - kMost) + " more";
  return out.empty() ? "none" : out;
}

void take_image_column(Table& table, const std::string& path, const std::string& image_column,
                       const std::string& default_name) {
  const std::string& name = image_column.empty() ? default_name : image_column;
  size_t index = table.columns.size();
  std::vector<std::string> names;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    names.push_back(table.columns[c].name);
    if (table.columns[c].name == name) index = c;
  }
  if (index == table.columns.size())
    throw FatalError("table " + path + ": no image column '" + name + "'; its columns are " +
                     quoted_list(names) + " (name the image column with --table-image)");
  TableColumn column = std::move(table.columns[index]);
  table.columns.erase(table.columns.begin() + static_cast<std::ptrdiff_t>(index));
  std::vector<std::string> paths;
  paths.reserve(table.rows);
  for (uint64_t r = 0; r < table.rows; ++r) {
    const FieldValue* v = column.uniform ? nullptr : &column.values[r];
    if (v == nullptr || v->null || v->kind != FieldKind::String || v->data.empty())
      throw FatalError("table " + path + ": row " + std::to_string(r + 1) + " has " +
                       (v != nullptr && (v->null || v->data.empty()) ? "no" : "a non-string") +
                       " image path in the column '" + name +
                       "'; every row needs its image's path there");
    paths.emplace_back(v->data.begin(), v->data.end());
  }
  table.member_columns.insert(table.member_columns.begin(), name);
  table.member_paths.insert(table.member_paths.begin(), std::move(paths));
}

}  // namespace tarmac::detail
