// libFuzzer target for derived columns (docs/format.md 8, 9): the first byte picks what the
// rest is. 0: a merged column file, opened by the reader (DerivedColumn, every sample's output
// read) and checked by verify (check_columns); 1: a part record (read_part_record); 2: a merge
// (merge_column) of one chunk into a dataset: [u32le L][L bytes: labels.safetensors][the
// chunk], with a part record written here that matches the chunk's size and CRC-32 (so the
// chunk's structure is what is tested) and claims its first byte's count of samples. Anything
// may be refused (ParseError, DataError, FatalError, ColumnRefused); no input may crash, hang
// or read outside the file, and a merged column must pass verify and open in the reader.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "check/column_check.h"
#include "columns/column_ops.h"
#include "columns/column_parts.h"
#include "common/crc32.h"
#include "common/error.h"
#include "format/column_file.h"
#include "format/safetensors.h"
#include "read/derived_column.h"
#include "write/manifest_file.h"

namespace {

namespace fs = std::filesystem;

// Removed at exit; never destroyed, so that the exit handler can still read it.
const fs::path& scratch() {
  static const fs::path* dir = [] {
    const auto* d = new fs::path(fs::temp_directory_path() /
                                 ("tarmac-fuzz-column-" + std::to_string(getpid())));
    fs::create_directories(*d / "columns");
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(scratch(), ec);
    });
    return d;
  }();
  return *dir;
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
  tarmac::check::check_columns(scratch(), l.labels_crc32, l.num_samples, std::nullopt, problems,
                               bytes);
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
    const tarmac::format::PartRecord r = tarmac::format::read_part_record(path);
    if (r.rank >= r.world) __builtin_trap();
  } catch (const tarmac::ParseError&) {
  }
}

void merge(const uint8_t* data, size_t size) {
  if (size < 5) return;
  const size_t l =
      std::min<size_t>(data[0] | data[1] << 8 | data[2] << 16 | size_t{data[3]} << 24, size - 5);
  const uint8_t samples = data[4];
  const uint8_t* labels = data + 5;
  const uint8_t* chunk = labels + l;
  const size_t chunk_size = size - 5 - l;
  const fs::path dir = scratch() / "merge";
  fs::remove_all(dir);
  fs::create_directories(dir / "columns" / "m.parts");
  write(dir / "labels.safetensors", labels, l);
  tarmac::DatasetIdentity id;
  try {
    id = tarmac::dataset_identity(dir);
  } catch (const std::runtime_error&) {
    return;  // not a dataset: the chunk is never read
  }
  write(dir / "columns" / "m.parts" / "part-00000-of-00001.chunk-000000.safetensors", chunk,
        chunk_size);
  const nlohmann::json record = {
      {"format", "tarmac-column-part/1"},
      {"column", "m"},
      {"rank", 0},
      {"world", 1},
      {"begin", 0},
      {"end", id.num_samples},
      {"dataset", {{"labels_crc32", id.labels_crc32}, {"num_samples", id.num_samples}}},
      {"fn", "fuzz:f"},
      {"tool", "fuzz"},
      {"batch_size", 1},
      {"fields", nlohmann::json::array()},
      {"chunks",
       {{{"file", "part-00000-of-00001.chunk-000000.safetensors"},
         {"samples", samples},
         {"bytes", chunk_size},
         {"crc32", tarmac::crc32_hex(tarmac::crc32_of({chunk, chunk_size}))}}}},
      {"done", samples},
      {"complete", true}};
  const std::string text = record.dump();
  write(dir / "columns" / "m.parts" / "part-00000-of-00001.json",
        reinterpret_cast<const uint8_t*>(text.data()), text.size());
  tarmac::ColumnMergeOptions o;
  o.dir = dir.string();
  o.name = "m";
  o.keep_parts = true;
  try {
    tarmac::merge_column(o);
  } catch (const tarmac::ColumnRefused&) {
    return;
  } catch (const tarmac::ParseError&) {
    return;
  } catch (const tarmac::DataError&) {
    return;
  } catch (const tarmac::FatalError&) {
    return;
  }
  // Merged: verify finds nothing wrong and the reader opens it.
  std::vector<tarmac::check::Problem> problems;
  uint64_t bytes = 0;
  tarmac::check::check_columns(dir, id.labels_crc32, id.num_samples, std::nullopt, problems, bytes);
  if (!problems.empty()) __builtin_trap();
  const tarmac::DerivedColumn c((dir / "columns" / "m.safetensors").string(), "m", id.num_samples,
                                id.labels_crc32);
  for (uint64_t i = 0; i < std::min<uint64_t>(id.num_samples, 4096); ++i) (void)c.value(i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      column_file(data + 1, size - 1);
      break;
    case 1:
      part_record(data + 1, size - 1);
      break;
    default:
      merge(data + 1, size - 1);
  }
  return 0;
}
