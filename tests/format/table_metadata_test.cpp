#include "format/table_metadata.h"

#include <catch2/catch.hpp>

using namespace tarmac::format;
using json = nlohmann::ordered_json;

TEST_CASE("table metadata: written once, read with COCO's categories and skeleton") {
  const json meta = {{"categories",
                      {{{"name", "person"},
                        {"keypoints", {"nose", "left_eye", "right_eye"}},
                        {"skeleton", {{1, 2}, {2, 3}, {0, 1}, {1, 10001}, {"a", 2}, {3}}}},
                       {{"keypoints", json::array()}}}},
                     {"info", {{"year", 2017}}}};
  const std::string text = table_metadata_text("coco", meta);
  CHECK(json::parse(text) == json({{"format", "coco"}, {"metadata", meta}}));
  const TableMetadata t = parse_table_metadata(text);
  CHECK(t.readable);
  CHECK(t.format == "coco");
  CHECK(t.metadata == meta);
  REQUIRE(t.categories.size() == 2);
  CHECK(t.categories[0].name == "person");
  CHECK(t.categories[0].keypoints == 3);
  CHECK(t.categories[0].links == 6);  // as listed
  // Only 1-based joint pairs in range are links to draw.
  CHECK(t.categories[0].skeleton == std::vector<std::pair<int, int>>{{1, 2}, {2, 3}});
  CHECK(t.categories[1].name == "?");
  CHECK(t.categories[1].skeleton.empty());
}

TEST_CASE("table metadata: any other text is read as unreadable or partial, never thrown") {
  CHECK_FALSE(parse_table_metadata("").readable);
  CHECK_FALSE(parse_table_metadata("[1]").readable);
  CHECK_FALSE(parse_table_metadata("{\"format\":").readable);
  const TableMetadata t = parse_table_metadata("{\"metadata\": {\"categories\": 3}}");
  CHECK(t.readable);
  CHECK(t.format == "?");
  CHECK(t.categories.empty());
}
