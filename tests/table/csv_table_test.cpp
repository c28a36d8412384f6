#include <catch2/catch.hpp>

#include "common/error.h"
#include "table/table.h"
#include "table_test_util.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::FieldKind;
using namespace table_test;

TEST_CASE("CSV: RFC 4180 quoting, CRLF, typed columns") {
  const std::string text =
      "\xEF\xBB\xBFimage_path,label,score,caption,mixed,empty\r\n"
      "000123.jpg,3,0.5,\"a cat, sitting\",7,\r\n"
      "dir/b.jpg,-4,2,\"she said \"\"hi\"\"\nand left\",x,\r\n"
      "\"c,1.jpg\",,1e-3,plain,,\r\n";
  const auto t = load("t.csv", text);
  CHECK(t.format == tarmac::TableFormat::Csv);
  REQUIRE(t.rows == 3);
  CHECK(t.member_columns == std::vector<std::string>{"image_path"});
  // A path that looks like a number stays text.
  CHECK(t.member_paths[0] == std::vector<std::string>{"000123.jpg", "dir/b.jpg", "c,1.jpg"});
  CHECK(column_names(t) == std::vector<std::string>{"label", "score", "caption", "mixed", "empty"});

  const auto& label = column(t, "label");
  CHECK(values_of<int64_t>(label.value(0)) == std::vector<int64_t>{3});
  CHECK(values_of<int64_t>(label.value(1)) == std::vector<int64_t>{-4});
  CHECK(label.value(2).null);
  CHECK(label.value(0).dtype == DType::I64);

  // Integers and floats in one column: F64 throughout, and uniform.
  const auto& score = column(t, "score");
  REQUIRE(score.uniform);
  CHECK(score.dtype == DType::F64);
  CHECK(values_of<double>(score.value(0)) == std::vector<double>{0.5});
  CHECK(values_of<double>(score.value(1)) == std::vector<double>{2.0});
  CHECK(values_of<double>(score.value(2)) == std::vector<double>{0.001});

  const auto& caption = column(t, "caption");
  CHECK(caption.value(0).kind == FieldKind::String);
  CHECK(text_of(caption.value(0)) == "a cat, sitting");
  CHECK(text_of(caption.value(1)) == "she said \"hi\"\nand left");
  CHECK(text_of(caption.value(2)) == "plain");

  // A number and a string in one column: String throughout, numbers as written.
  const auto& mixed = column(t, "mixed");
  CHECK(mixed.value(0).kind == FieldKind::String);
  CHECK(text_of(mixed.value(0)) == "7");
  CHECK(text_of(mixed.value(1)) == "x");
  CHECK(mixed.value(2).null);

  for (uint64_t r = 0; r < 3; ++r) CHECK(column(t, "empty").value(r).null);
}

TEST_CASE("CSV: a file without a final line break, and --table-image") {
  tarmac::TableOptions o;
  o.image_column = "file";
  const auto t = load("n.csv", "file,n\na.png,1\nb.png,2", o);
  CHECK(t.rows == 2);
  CHECK(t.member_paths[0] == std::vector<std::string>{"a.png", "b.png"});
  CHECK(values_of<int64_t>(column(t, "n").value(1)) == std::vector<int64_t>{2});
}

TEST_CASE("CSV: malformed tables name the line") {
  tarmac::TableOptions o;
  o.format = tarmac::TableFormat::Csv;
  CHECK_THROWS_WITH(load("b1.csv", "image_path,a\nx.jpg,1\ny.jpg,2,3\n", o),
                    Contains("b1.csv, line 3") && Contains("3 cells") && Contains("2 columns"));
  CHECK_THROWS_WITH(load("b2.csv", "image_path,a\nx.jpg,\"open\n", o),
                    Contains("line 2") && Contains("not closed"));
  CHECK_THROWS_WITH(load("b3.csv", "image_path,a\nx.jpg,\"q\"x\n", o),
                    Contains("line 2") && Contains("after a closing quote"));
  CHECK_THROWS_WITH(load("b4.csv", "image_path,a\nx.jpg,ab\"c\n", o),
                    Contains("line 2") && Contains("inside an unquoted field"));
  CHECK_THROWS_WITH(load("b5.csv", "image_path,a,a\nx.jpg,1,2\n", o),
                    Contains("line 1") && Contains("'a' twice"));
  CHECK_THROWS_WITH(load("b6.csv", "path,a\nx.jpg,1\n", o),
                    Contains("no image column 'image_path'") && Contains("'path', 'a'") &&
                        Contains("--table-image"));
  CHECK_THROWS_WITH(load("b7.csv", "image_path,a\nx.jpg,1\n,2\n", o),
                    Contains("row 2") && Contains("no image path"));
  CHECK_THROWS_WITH(load("b8.csv", "image_path,\nx.jpg,1\n", o), Contains("has no name"));
  // A quoted field's line breaks count: the bad row is on line 4.
  CHECK_THROWS_WITH(load("b9.csv", "image_path,a\nx.jpg,\"1\n2\"\ny.jpg\n", o), Contains("line 4"));
}

TEST_CASE("CSV: a cell over --max-label-size is refused, naming line, row and column") {
  tarmac::TableOptions o;
  o.max_cell_bytes = 12;
  // At the limit: read.
  CHECK(load("ok.csv", "image_path,caption\na.jpg,123456789012\n", o).rows == 1);
  // Unquoted, one byte over.
  CHECK_THROWS_WITH(load("big.csv", "image_path,caption\na.jpg,ok\nb.jpg,1234567890123\n", o),
                    Contains("big.csv, line 3 (row 1), column 'caption': a cell of 13 B, over "
                             "--max-label-size 12 B (a table is read whole into memory); raise "
                             "--max-label-size to read it"));
  // Quoted, spanning lines, with "" inside: its whole length is named, from the line it opens.
  CHECK_THROWS_WITH(load("q.csv", "image_path,caption\na.jpg,\"12\n45\"\"78901234\"\n", o),
                    Contains("line 2 (row 0), column 'caption': a cell of 14 B, over "
                             "--max-label-size 12 B"));
  // A header cell.
  CHECK_THROWS_WITH(load("h.csv", "image_path,a_much_longer_name\n", o),
                    Contains("line 1 (the header), column 2: a cell of 18 B"));
}
