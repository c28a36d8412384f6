// Times load_table on one file, then the conversion's plan of it (rows grouped by the members
// they name: convert/table_plan.h), as `convert --table` does before reading any input (run by
// hand; docs/performance.md has the command and figures):
//   table_load_bench TABLE [FORMAT]
// prints the rows, columns, images and seconds; peak RSS comes from /usr/bin/time -v around it.
#include <chrono>
#include <cstdio>
#include <exception>

#include "convert/table_plan.h"
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
    tarmac::Table table = tarmac::load_table(argv[1], options);
    const auto loaded = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(loaded - start).count();
    std::printf("%s: %s, %llu rows, %zu label columns, %llu bytes, read in %.2f s\n", argv[1],
                tarmac::table_format_name(table.format),
                static_cast<unsigned long long>(table.rows), table.columns.size(),
                static_cast<unsigned long long>(table.bytes), s);
    const tarmac::TablePlan plan(std::move(table), "train2017/", {});
    const double p =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded).count();
    std::printf("planned: %zu images in %.2f s; %.2f s in all\n", plan.groups().size(), p, s + p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
