#include <catch2/catch.hpp>

#include "common/error.h"
#include "table/table.h"
#include "table_test_util.h"

using Catch::Matchers::Contains;
using tarmac::FatalError;
using tarmac::TableFormat;
using namespace table_test;

TEST_CASE("table format names round-trip, and an unknown one lists the accepted") {
  for (TableFormat f : {TableFormat::Auto, TableFormat::Coco, TableFormat::Npz,
                        TableFormat::JsonLines, TableFormat::Csv, TableFormat::List})
    CHECK(tarmac::parse_table_format(tarmac::table_format_name(f)) == f);
  CHECK(std::string(tarmac::table_format_name(TableFormat::JsonLines)) == "jsonl");
  CHECK_THROWS_WITH(tarmac::parse_table_format("tsv"),
                    Contains("'tsv'") && Contains("coco, npz, jsonl, csv, list"));
}

TEST_CASE("load_table records size and CRC-32 of the file") {
  // zlib.crc32(b'a.png b.png\nc.png d.png\n') in Python.
  const auto t = load("crc.txt", "a.png b.png\nc.png d.png\n");
  CHECK(t.bytes == 24);
  CHECK(t.crc32 == 0x7a5636edu);
  CHECK(t.format == TableFormat::List);
  CHECK(t.path.ends_with("crc.txt"));
}

TEST_CASE("load_table detects the format from the content") {
  CHECK(load("d1", "{\"image_path\": \"a.jpg\"}\n{\"image_path\": \"b.jpg\"}\n").format ==
        TableFormat::JsonLines);
  CHECK(load("d2", "image_path,label\na.jpg,1\n").format == TableFormat::Csv);
  CHECK(load("d3", "\n\nimage_path,label\na.jpg,1\n").format == TableFormat::Csv);
  CHECK(load("d4", "a.jpg b.png\n").format == TableFormat::List);
  // A one-line JSON object that is not COCO is a one-row JSON Lines table.
  CHECK(load("d5", "{\"image_path\": \"a.jpg\", \"x\": [1, 2]}").format == TableFormat::JsonLines);
  // The zip magic is npz, whatever the name; this build has no npz reader.
  CHECK_THROWS_WITH(load("d6.csv", std::string("PK\x03\x04rest", 8)), Contains("npz"));
}

TEST_CASE("load_table refuses what it cannot read") {
  CHECK_THROWS_WITH(tarmac::load_table("/nonexistent/t.csv", {}),
                    Contains("/nonexistent/t.csv") && Contains("cannot open"));
  tarmac::TableOptions small;
  small.max_bytes = 10;
  CHECK_THROWS_WITH(load("big.txt", "a.png b.png c.png\n", small), Contains("over the limit"));
  CHECK_THROWS_WITH(load("empty.txt", "# only a comment\n\n"), Contains("no rows"));
}

TEST_CASE("a forced format reads the file as that format") {
  tarmac::TableOptions o;
  o.format = TableFormat::List;
  const auto t = load("forced.csv", "a,b c,d\n", o);
  CHECK(t.format == TableFormat::List);
  REQUIRE(t.member_paths.size() == 2);
  CHECK(t.member_paths[0][0] == "a,b");
  CHECK(t.member_paths[1][0] == "c,d");
}

TEST_CASE("TableColumn::value slices a uniform column and copies a per-row one") {
  tarmac::TableColumn c;
  c.name = "k";
  c.uniform = true;
  c.dtype = tarmac::DType::I64;
  c.row_shape = {2};
  const int64_t rows[4] = {1, 2, 3, 4};
  c.data.assign(reinterpret_cast<const uint8_t*>(rows),
                reinterpret_cast<const uint8_t*>(rows) + 32);
  const auto v = c.value(1);
  CHECK(v.shape == std::vector<int64_t>{2});
  CHECK(values_of<int64_t>(v) == std::vector<int64_t>{3, 4});
  CHECK_THROWS_AS(c.value(2), tarmac::InternalError);
}
