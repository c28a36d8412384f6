#include <catch2/catch.hpp>

#include "common/error.h"
#include "table/table.h"
#include "table_test_util.h"

using Catch::Matchers::Contains;
using namespace table_test;

TEST_CASE("split list: Marigold's filename list, default column names") {
  const auto t =
      load("filename_list_train.txt",
           "# hypersim\n"
           "train/ai_001_001/rgb_cam_00_fr0000.png train/ai_001_001/depth_plane_cam_00_fr0000.png\n"
           "\n"
           "  train/ai_001_001/rgb_cam_00_fr0001.png\t "
           "train/ai_001_001/depth_plane_cam_00_fr0001.png  \r\n");
  CHECK(t.format == tarmac::TableFormat::List);
  REQUIRE(t.rows == 2);
  CHECK(t.columns.empty());
  CHECK(t.member_columns == std::vector<std::string>{"image", "path1"});
  CHECK(t.member_paths[0] == std::vector<std::string>{"train/ai_001_001/rgb_cam_00_fr0000.png",
                                                      "train/ai_001_001/rgb_cam_00_fr0001.png"});
  CHECK(t.member_paths[1] ==
        std::vector<std::string>{"train/ai_001_001/depth_plane_cam_00_fr0000.png",
                                 "train/ai_001_001/depth_plane_cam_00_fr0001.png"});
}

TEST_CASE("split list: named columns, the image column moved first") {
  tarmac::TableOptions o;
  o.list_columns = {"depth", "rgb", "normal"};
  o.image_column = "rgb";
  const auto t = load("l2.txt", "d0.png r0.png n0.png\nd1.png r1.png n1.png\n", o);
  CHECK(t.member_columns == std::vector<std::string>{"rgb", "depth", "normal"});
  CHECK(t.member_paths[0] == std::vector<std::string>{"r0.png", "r1.png"});
  CHECK(t.member_paths[1] == std::vector<std::string>{"d0.png", "d1.png"});
  CHECK(t.member_paths[2] == std::vector<std::string>{"n0.png", "n1.png"});
}

TEST_CASE("split list: malformed lists name the line or the columns") {
  CHECK_THROWS_WITH(load("l3.txt", "a.png b.png\n# c\nc.png\n"),
                    Contains("l3.txt, line 3") && Contains("1 paths, where line 1 has 2"));
  tarmac::TableOptions o;
  o.list_columns = {"rgb", "depth"};
  CHECK_THROWS_WITH(load("l4.txt", "a.png b.png\n", o), Contains("no image column 'image'") &&
                                                            Contains("'rgb', 'depth'") &&
                                                            Contains("--table-image"));
  o.list_columns = {"image"};
  CHECK_THROWS_WITH(load("l5.txt", "a.png b.png\n", o),
                    Contains("name 2 paths") && Contains("--table-columns names 1"));
  o.list_columns = {"image", "image"};
  CHECK_THROWS_WITH(load("l6.txt", "a.png b.png\n", o), Contains("'image' twice"));
  CHECK_THROWS_WITH(load("l7.txt", "a.png \xff.png\n"), Contains("UTF-8"));
}
