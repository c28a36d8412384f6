// libFuzzer target: the annotation-table readers (COCO, JSON Lines, CSV, split list) on
// arbitrary bytes must return a consistent Table or throw FatalError. The first byte picks the
// format (low two bits) and options (bit 4: named list columns, bit 5: another image column);
// the rest is the table.
#include <cstddef>
#include <cstdint>
#include <span>

#include "check_field_value.h"
#include "common/error.h"
#include "table/table_formats.h"

using tarmac::fuzz::check_field_value;

namespace {

void check_table(const tarmac::Table& t) {
  if (t.member_columns.empty() || t.member_columns.size() != t.member_paths.size())
    __builtin_trap();
  for (const auto& paths : t.member_paths)
    if (paths.size() != t.rows) __builtin_trap();
  for (const auto& path : t.member_paths[0])
    if (path.empty()) __builtin_trap();
  for (const auto& c : t.columns) {
    if (c.uniform) {
      uint64_t row_bytes = tarmac::dtype_size(c.dtype);
      for (int64_t d : c.row_shape) row_bytes *= static_cast<uint64_t>(d);
      if (c.data.size() != row_bytes * t.rows) __builtin_trap();
    } else if (c.values.size() != t.rows) {
      __builtin_trap();
    }
    for (uint64_t r = 0; r < t.rows; ++r) check_field_value(c.value(r));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::span<const uint8_t> bytes(data + 1, size - 1);
  tarmac::TableOptions options;
  if (selector & 0x10) options.list_columns = {"depth", "image"};
  if (selector & 0x20) options.image_column = "file";
  try {
    tarmac::Table table;
    switch (selector & 3) {
      case 0:
        table = tarmac::load_coco_table("fuzz", bytes, options);
        break;
      case 1:
        table = tarmac::load_jsonl_table("fuzz", bytes, options);
        break;
      case 2:
        table = tarmac::load_csv_table("fuzz", bytes, options);
        break;
      default:
        table = tarmac::load_list_table("fuzz", bytes, options);
        break;
    }
    if (table.rows > 0) check_table(table);
  } catch (const tarmac::FatalError&) {
  }
  return 0;
}
