// Times load_table on one file (run by hand; docs/performance.md has the command and figures):
//   table_load_bench TABLE [FORMAT]
// prints the rows, columns and seconds; peak RSS comes from /usr/bin/time -v around it.
#include <chrono>
#include <cstdio>
#include <exception>

#include "table/table.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: table_load_bench TABLE [auto|coco|jsonl|csv|list]\n");
    return 2;
  }
  try {
    tarmac::TableOptions options;
    if (argc > 2) options.format = tarmac::parse_table_format(argv[2]);
    const auto start = std::chrono::steady_clock::now();
    const tarmac::Table table = tarmac::load_table(argv[1], options);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s: %s, %llu rows, %zu label columns, %llu bytes, %.2f s\n", argv[1],
                tarmac::table_format_name(table.format),
                static_cast<unsigned long long>(table.rows), table.columns.size(),
                static_cast<unsigned long long>(table.bytes), s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
