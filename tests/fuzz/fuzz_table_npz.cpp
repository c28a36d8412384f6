// libFuzzer target: the HumanData npz table reader on arbitrary bytes must return a table whose
// columns all have one value per row, or throw FatalError.
#include <cstddef>
#include <cstdint>

#include "check_field_value.h"
#include "common/error.h"
#include "table/table_formats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tarmac::TableOptions o;
  o.max_bytes = 1 << 20;
  try {
    const tarmac::Table t = tarmac::load_npz_table("fuzz.npz", {data, size}, o);
    if (t.member_columns.size() != 1 || t.member_paths.size() != 1 ||
        t.member_paths[0].size() != t.rows)
      __builtin_trap();
    for (const tarmac::TableColumn& c : t.columns) {
      if (c.uniform) {
        uint64_t row = tarmac::dtype_size(c.dtype);
        for (int64_t d : c.row_shape) row *= static_cast<uint64_t>(d);
        if (c.data.size() != row * t.rows || !c.values.empty()) __builtin_trap();
      } else {
        if (c.values.size() != t.rows) __builtin_trap();
        for (const tarmac::FieldValue& v : c.values) tarmac::fuzz::check_field_value(v);
      }
    }
    (void)t.metadata.dump();
  } catch (const tarmac::FatalError&) {
  }
  return 0;
}
