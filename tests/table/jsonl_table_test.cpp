#include <catch2/catch.hpp>

#include "common/error.h"
#include "table/table.h"
#include "table_test_util.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::FieldKind;
using namespace table_test;

TEST_CASE("JSON Lines: columns are the union of keys, missing and null are null") {
  const std::string text =
      "{\"image_path\": \"imgs/a.jpg\", \"label\": 3, \"box\": [1.5, 2, 3, 4]}\n"
      "\n"
      "{\"image_path\": \"imgs/b.jpg\", \"label\": null, \"box\": [5, 6, 7, 8], "
      "\"meta\": {\"gender\": \"f\"}}\r\n"
      "{\"image_path\": \"./c.jpg\", \"label\": 4, \"box\": [0, 0, 1, 1]}\n";
  const auto t = load("a.jsonl", text);
  CHECK(t.format == tarmac::TableFormat::JsonLines);
  REQUIRE(t.rows == 3);
  REQUIRE(t.member_columns == std::vector<std::string>{"image_path"});
  CHECK(t.member_paths[0] == std::vector<std::string>{"imgs/a.jpg", "imgs/b.jpg", "./c.jpg"});
  CHECK(column_names(t) == std::vector<std::string>{"label", "box", "meta.gender"});

  const auto& label = column(t, "label");
  CHECK_FALSE(label.uniform);
  CHECK(values_of<int64_t>(label.value(0)) == std::vector<int64_t>{3});
  CHECK(label.value(1).null);
  CHECK(values_of<int64_t>(label.value(2)) == std::vector<int64_t>{4});

  // The first box holds a float, so its row is F64 and the others I64: per-row values.
  const auto& box = column(t, "box");
  CHECK(box.value(0).dtype == DType::F64);
  CHECK(values_of<double>(box.value(0)) == std::vector<double>{1.5, 2, 3, 4});
  CHECK(values_of<int64_t>(box.value(1)) == std::vector<int64_t>{5, 6, 7, 8});

  const auto& gender = column(t, "meta.gender");
  CHECK(gender.value(0).null);
  CHECK(gender.value(1).kind == FieldKind::String);
  CHECK(text_of(gender.value(1)) == "f");
  CHECK(gender.value(2).null);
}

TEST_CASE("JSON Lines: a column of one dtype and shape in every row is uniform") {
  const auto t = load("u.jsonl",
                      "{\"image_path\": \"a\", \"kp\": [[1, 2, 1], [3, 4, 0]]}\n"
                      "{\"image_path\": \"b\", \"kp\": [[5, 6, 1], [7, 8, 1]]}\n");
  const auto& kp = column(t, "kp");
  REQUIRE(kp.uniform);
  CHECK(kp.dtype == DType::I64);
  CHECK(kp.row_shape == std::vector<int64_t>{2, 3});
  CHECK(kp.data.size() == 2 * 6 * 8);
  CHECK(values_of<int64_t>(kp.value(1)) == std::vector<int64_t>{5, 6, 1, 7, 8, 1});
}

TEST_CASE("JSON Lines: mixed arrays are JSON text, strings are strings") {
  const auto t = load("m.jsonl", "{\"image_path\": \"a\", \"x\": [1, \"two\"], \"s\": \"hi\"}\n");
  CHECK(column(t, "x").value(0).kind == FieldKind::Json);
  CHECK(text_of(column(t, "x").value(0)) == "[1,\"two\"]");
  CHECK(text_of(column(t, "s").value(0)) == "hi");
}

TEST_CASE("JSON Lines: --table-image names another column") {
  tarmac::TableOptions o;
  o.image_column = "file";
  const auto t = load("i.jsonl", "{\"file\": \"x.png\", \"image_path\": \"y.png\"}\n", o);
  CHECK(t.member_columns == std::vector<std::string>{"file"});
  CHECK(t.member_paths[0][0] == "x.png");
  CHECK(column_names(t) == std::vector<std::string>{"image_path"});
}

TEST_CASE("JSON Lines: malformed tables name the line") {
  tarmac::TableOptions o;
  o.format = tarmac::TableFormat::JsonLines;
  CHECK_THROWS_WITH(
      load("t1.jsonl", "{\"image_path\": \"a\"}\n{\"image_path\": \"b\", \"x\": [1,\n", o),
      Contains("t1.jsonl, line 2") && Contains("malformed"));
  CHECK_THROWS_WITH(load("t2.jsonl", "{\"image_path\": \"a\"}\n[1, 2]\n", o),
                    Contains("line 2") && Contains("not a JSON object"));
  CHECK_THROWS_WITH(load("t3.jsonl", "{\"image_path\": \"a\", \"k\": 1, \"k\": 2}\n", o),
                    Contains("line 1") && Contains("'k' twice"));
  CHECK_THROWS_WITH(load("t4.jsonl", "{\"path\": \"a\", \"y\": 1}\n", o),
                    Contains("no image column 'image_path'") && Contains("'path', 'y'") &&
                        Contains("--table-image"));
  CHECK_THROWS_WITH(load("t5.jsonl", "{\"image_path\": \"a\"}\n{\"image_path\": null}\n", o),
                    Contains("row 2") && Contains("no image path"));
  CHECK_THROWS_WITH(load("t6.jsonl", "{\"image_path\": \"a\"}\n{\"image_path\": 7}\n", o),
                    Contains("row 2") && Contains("non-string"));
  CHECK_THROWS_WITH(load("t7.jsonl", "{\"image_path\": \"a\"}\n{\"x\": 1}\n", o),
                    Contains("row 2") && Contains("no image path"));
}

TEST_CASE("JSON Lines: a line over --max-label-size is refused before it is parsed") {
  tarmac::TableOptions o;
  const std::string line = "{\"image_path\": \"a.jpg\", \"caption\": \"0123456789\"}";
  o.max_cell_bytes = line.size();
  CHECK(load("ok.jsonl", line + "\n" + line + "\n", o).rows == 2);
  o.max_cell_bytes = line.size() - 1;
  CHECK_THROWS_WITH(load("big.jsonl", "\n" + line + "\n", o),
                    Contains("big.jsonl, line 2 (row 0): a line of " + std::to_string(line.size()) +
                             " B, over --max-label-size " + std::to_string(line.size() - 1) +
                             " B (a JSON row is parsed whole, at ~25-40x its size); raise "
                             "--max-label-size to read it"));
}
