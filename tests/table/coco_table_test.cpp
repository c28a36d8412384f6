#include <catch2/catch.hpp>

#include "common/error.h"
#include "table/table.h"
#include "table_test_util.h"

using Catch::Matchers::Contains;
using tarmac::DType;
using tarmac::FieldKind;
using namespace table_test;

namespace {

// Two images, three annotations (two persons on image 7, one crowd RLE on image 3), in the
// layout of person_keypoints_train2017.json, with the annotations BEFORE the images.
const char* kCoco = R"({
  "info": {"description": "tiny", "year": 2017},
  "licenses": [{"id": 1, "name": "x"}],
  "annotations": [
    {"segmentation": [[10.5, 20, 30, 20, 30, 40]], "num_keypoints": 2, "area": 120.25,
     "iscrowd": 0, "keypoints": [1, 2, 2, 3.5, 4, 1, 0, 0, 0], "image_id": 7,
     "bbox": [10.5, 20, 19.5, 20], "category_id": 1, "id": 100},
    {"segmentation": [[1, 1, 2, 2, 3, 1]], "num_keypoints": 0, "area": 5,
     "iscrowd": 0, "keypoints": [0, 0, 0, 0, 0, 0, 0, 0, 0], "image_id": 7,
     "bbox": [1, 1, 2, 1], "category_id": 1, "id": 101, "score": 0.5},
    {"segmentation": {"counts": [0, 5, 10], "size": [4, 5]}, "num_keypoints": 0, "area": 9,
     "iscrowd": 1, "keypoints": [0, 0, 0, 0, 0, 0, 0, 0, 0], "image_id": 3,
     "bbox": [0, 0, 3, 3], "category_id": 1, "id": 102}
  ],
  "images": [
    {"license": 1, "file_name": "000000000003.jpg", "height": 4, "width": 5, "id": 3,
     "coco_url": "http://x/3.jpg"},
    {"license": 1, "file_name": "000000000007.jpg", "height": 480, "width": 640, "id": 7,
     "coco_url": "http://x/7.jpg"}
  ],
  "categories": [{"supercategory": "person", "id": 1, "name": "person",
                  "keypoints": ["nose", "left_eye", "right_eye"], "skeleton": [[1, 2], [1, 3]]}]
})";

}  // namespace

TEST_CASE("COCO: rows are annotations joined to their images") {
  const auto t = load("person_keypoints.json", kCoco);
  CHECK(t.format == tarmac::TableFormat::Coco);
  REQUIRE(t.rows == 3);
  CHECK(t.member_columns == std::vector<std::string>{"image"});
  CHECK(t.member_paths[0] ==
        std::vector<std::string>{"000000000007.jpg", "000000000007.jpg", "000000000003.jpg"});
  CHECK(column_names(t) == std::vector<std::string>{"segmentation", "num_keypoints", "area",
                                                    "iscrowd", "keypoints", "image_id", "bbox",
                                                    "category_id", "id", "score", "image.width",
                                                    "image.height", "image.id"});

  const auto& bbox = column(t, "bbox");
  REQUIRE(bbox.uniform);
  CHECK(bbox.dtype == DType::F64);
  CHECK(bbox.row_shape == std::vector<int64_t>{4});
  CHECK(values_of<double>(bbox.value(0)) == std::vector<double>{10.5, 20, 19.5, 20});
  CHECK(values_of<double>(bbox.value(2)) == std::vector<double>{0, 0, 3, 3});

  const auto& kp = column(t, "keypoints");
  REQUIRE(kp.uniform);
  CHECK(kp.row_shape == std::vector<int64_t>{3, 3});
  CHECK(values_of<double>(kp.value(0)) == std::vector<double>{1, 2, 2, 3.5, 4, 1, 0, 0, 0});

  for (const char* name : {"id", "image_id", "category_id", "iscrowd", "num_keypoints"}) {
    INFO(name);
    CHECK(column(t, name).uniform);
    CHECK(column(t, name).dtype == DType::I64);
  }
  CHECK(values_of<int64_t>(column(t, "id").value(2)) == std::vector<int64_t>{102});
  CHECK(values_of<int64_t>(column(t, "iscrowd").value(2)) == std::vector<int64_t>{1});
  CHECK(values_of<double>(column(t, "area").value(0)) == std::vector<double>{120.25});
  // area 5 is an integer in the file, still F64 in the column.
  CHECK(column(t, "area").uniform);
  CHECK(values_of<double>(column(t, "area").value(1)) == std::vector<double>{5});

  const auto& seg = column(t, "segmentation");
  CHECK(seg.value(0).kind == FieldKind::Json);
  CHECK(text_of(seg.value(0)) == "[[10.5,20,30,20,30,40]]");
  CHECK(text_of(seg.value(2)) == R"({"counts":[0,5,10],"size":[4,5]})");

  // A key only some annotations have: null elsewhere.
  const auto& score = column(t, "score");
  CHECK(score.value(0).null);
  CHECK(values_of<double>(score.value(1)) == std::vector<double>{0.5});
  CHECK(score.value(2).null);

  CHECK(values_of<int64_t>(column(t, "image.width").value(0)) == std::vector<int64_t>{640});
  CHECK(values_of<int64_t>(column(t, "image.height").value(2)) == std::vector<int64_t>{4});
  CHECK(values_of<int64_t>(column(t, "image.id").value(2)) == std::vector<int64_t>{3});

  REQUIRE(t.metadata.contains("categories"));
  CHECK(t.metadata["categories"][0]["keypoints"][2] == "right_eye");
  CHECK(t.metadata["categories"][0]["skeleton"][1][1] == 3);
  CHECK(t.metadata["coco_info"]["year"] == 2017);
  REQUIRE(t.ignored.size() == 1);
  CHECK_THAT(t.ignored[0].reason, Contains("'licenses'"));
  CHECK_FALSE(t.ignored[0].values_lost);  // said as information, not warned
}

TEST_CASE("COCO: --table-image takes another key of images[]") {
  tarmac::TableOptions o;
  o.image_column = "coco_url";
  const auto t = load("url.json", kCoco, o);
  CHECK(t.member_paths[0][2] == "http://x/3.jpg");
  o.image_column = "path";
  CHECK_THROWS_WITH(load("url2.json", kCoco, o), Contains("images[0] (id 3) has no 'path'") &&
                                                     Contains("'file_name'") &&
                                                     Contains("--table-image"));
}

TEST_CASE("COCO: a one-line file is still COCO, not JSON Lines") {
  const auto t = load(
      "one.json",
      R"({"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"id": 5, "image_id": 1}]})");
  CHECK(t.format == tarmac::TableFormat::Coco);
  CHECK(t.rows == 1);
  CHECK(column(t, "image.width").value(0).null);
}

TEST_CASE("COCO: malformed tables name the annotation or image") {
  tarmac::TableOptions o;
  o.format = tarmac::TableFormat::Coco;
  const std::string img = R"("images": [{"id": 1, "file_name": "a.jpg"}])";
  CHECK_THROWS_WITH(
      load("c1.json",
           "{" + img + R"(, "annotations": [{"id": 5, "image_id": 1}, {"id": 9, "image_id": 2}]})",
           o),
      Contains("c1.json") && Contains("annotations[1]") && Contains("image_id 2"));
  CHECK_THROWS_WITH(load("c2.json", "{" + img + R"(, "annotations": [{"id": 5, "image_id": 1)", o),
                    Contains("c2.json") && Contains("malformed"));
  CHECK_THROWS_WITH(
      load("c3.json",
           "{" + img + R"(, "annotations": [{"image_id": 1, "keypoints": [1, 2, 3, 4]}]})", o),
      Contains("annotations[0]") && Contains("'keypoints'") && Contains("triples"));
  CHECK_THROWS_WITH(
      load("c4.json", "{" + img + R"(, "annotations": [{"image_id": 1, "bbox": [1, 2, 3]}]})", o),
      Contains("annotations[0]") && Contains("'bbox'"));
  CHECK_THROWS_WITH(
      load("c3b.json",
           "{" + img + R"(, "annotations": [{"image_id": 1, "keypoints": [[1, 2, 3]]}]})", o),
      Contains("annotations[0]") && Contains("'keypoints' is not a flat list"));
  CHECK_THROWS_WITH(
      load("c3c.json", "{" + img + R"(, "annotations": [{"image_id": 1, "bbox": "1 2 3 4"}]})", o),
      Contains("annotations[0]") && Contains("'bbox' is \"1 2 3 4\""));
  CHECK_THROWS_WITH(
      load("c3d.json",
           "{" + img +
               R"(, "annotations": [{"image_id": 1, "segmentation": [], "segmentation": []}]})",
           o),
      Contains("annotations[0] has the key 'segmentation' twice"));
  CHECK_THROWS_WITH(load("c5.json", "{" + img + R"(, "annotations": [{"id": 1}]})", o),
                    Contains("annotations[0] has no 'image_id'"));
  CHECK_THROWS_WITH(load("c6.json", "{" + img + "}", o), Contains("no 'annotations'"));
  CHECK_THROWS_WITH(
      load("c7.json",
           R"({"images": [{"id": 1, "file_name": ""}], "annotations": [{"image_id": 1}]})", o),
      Contains("images[0] (id 1)") && Contains("not an image path"));
  CHECK_THROWS_WITH(
      load("c8.json", "{" + img + R"(, "annotations": [{"image_id": 1, "id": 1, "id": 2}]})", o),
      Contains("annotations[0] has the key 'id' twice"));
  CHECK_THROWS_WITH(
      load(
          "c9.json",
          R"({"images": [{"id": 1, "file_name": "a"}, {"id": 1, "file_name": "b"}], "annotations": []})",
          o),
      Contains("images[1]") && Contains("id 1 is taken twice"));
  CHECK_THROWS_WITH(load("c10.json", "{" + img + R"(, "annotations": [{"image_id": "x"}]})", o),
                    Contains("annotations[0]") && Contains("not an integer"));
  CHECK_THROWS_WITH(load("c11.json", "{" + img + R"(, "annotations": [3]})", o),
                    Contains("annotations[0] is not an object"));
  CHECK_THROWS_WITH(load("c12.json", "[1, 2]", o), Contains("not a JSON object"));
  CHECK_THROWS_WITH(
      load("c13.json",
           R"({"images": [{"id": 1, "x": )" + std::string(200, '[') + std::string(200, ']') + "}]}",
           o),
      Contains("64 levels"));
}

TEST_CASE("COCO: null and empty values of the streamed keys") {
  const auto t = load("nulls.json", R"({"images": [{"id": 1, "file_name": "a.jpg"}],
    "annotations": [{"image_id": 1, "bbox": null, "segmentation": null, "keypoints": []},
                    {"image_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"counts": "PQ1", "size": [2, 2]},
                     "keypoints": [1, 2, 2]}]})");
  CHECK(column(t, "bbox").value(0).null);
  CHECK(values_of<double>(column(t, "bbox").value(1)) == std::vector<double>{1, 2, 3, 4});
  CHECK(column(t, "segmentation").value(0).null);
  CHECK(text_of(column(t, "segmentation").value(1)) == R"({"counts":"PQ1","size":[2,2]})");
  CHECK(column(t, "keypoints").value(0).shape == std::vector<int64_t>{0, 3});
  CHECK(column(t, "keypoints").value(1).shape == std::vector<int64_t>{1, 3});
}

TEST_CASE("COCO: a value over --max-label-size is refused, naming the element and key") {
  tarmac::TableOptions o;
  o.format = tarmac::TableFormat::Coco;
  o.max_cell_bytes = 16;
  const std::string img = R"("images": [{"id": 1, "file_name": "a.jpg"}])";
  const std::string seg = R"([[1, 2, 3, 4, 5, 6, 7, 8, 9]])";  // "[[1,2,3,4,5,6,7,8" is 17 B
  CHECK(
      load("ok.json", "{" + img + R"(, "annotations": [{"image_id": 1, "bbox": [1, 2, 3, 4]}]})", o)
          .rows == 1);
  CHECK_THROWS_WITH(
      load("s.json",
           "{" + img + R"(, "annotations": [{"image_id": 1}, {"image_id": 1, "segmentation": )" +
               seg + "}]}",
           o),
      Contains("annotations[1], key 'segmentation': a value of at least 17 B, over "
               "--max-label-size 16 B; raise --max-label-size to read it"));
  CHECK_THROWS_WITH(
      load("t.json",
           "{" + img + R"(, "annotations": [{"image_id": 1, "note": "0123456789abcdefg"}]})", o),
      Contains("annotations[0], key 'note': a value of 17 B, over --max-label-size 16 B"));
}
