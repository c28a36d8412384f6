// libFuzzer target for derived columns (docs/format.md 8, 9): the first byte picks what the
// rest is. 0: a merged column file, opened by the reader (DerivedColumn, every sample's output
// read) and checked by verify (check_columns); 1: a part record (read_part_record). Anything
// may be refused (ParseError, DataError, FatalError); no input may crash, hang or read outside
// the file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "check/column_check.h"
#include "columns/column_parts.h"
#include "common/error.h"
#include "format/column_file.h"
#include "format/safetensors.h"
#include "read/derived_column.h"

namespace {

namespace fs = std::filesystem;

const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path d =
        fs::temp_directory_path() / ("tarmac-fuzz-column-" + std::to_string(getpid()));
    fs::create_directories(d / "columns");
    return d;
  }();
  return dir;
}

void write(const fs::path& p, const uint8_t* data, size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void column_file(const uint8_t* data, size_t size) {
  const fs::path path = scratch() / "columns" / "c.safetensors";
  write(path, data, size);
  tarmac::format::ColumnLayout l;
  try {
    l = tarmac::format::read_column_layout(tarmac::parse_safetensors({data, size}));
  } catch (const tarmac::ParseError&) {
    return;
  }
  std::vector<tarmac::check::Problem> problems;
  uint64_t bytes = 0;
  tarmac::check::check_columns(scratch(), l.labels_crc32, l.num_samples, problems, bytes);
  try {
    const tarmac::DerivedColumn c(path.string(), "c", l.num_samples, l.labels_crc32);
    const uint64_t n = std::min<uint64_t>(l.num_samples, 4096);
    for (uint64_t i = 0; i < n; ++i) try {
        const tarmac::TensorView v = c.value(i);
        const auto all = c.values().bytes;
        if (!v.bytes.empty() && (v.bytes.data() < all.data() ||
                                 v.bytes.data() + v.bytes.size() > all.data() + all.size()))
          __builtin_trap();
      } catch (const tarmac::DataError&) {
      }
  } catch (const tarmac::ParseError&) {
  } catch (const tarmac::DataError&) {
  }
}

void part_record(const uint8_t* data, size_t size) {
  const fs::path path = scratch() / "part-00000-of-00001.json";
  write(path, data, size);
  try {
    const tarmac::PartRecord r = tarmac::read_part_record(path);
    if (r.rank >= r.world) __builtin_trap();
  } catch (const tarmac::ParseError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    column_file(data + 1, size - 1);
  else
    part_record(data + 1, size - 1);
  return 0;
}
