#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "common/error.h"
#include "transform/geometry.h"

using tarmac::BoxConvention;
using tarmac::compute_geometry;
using tarmac::CropMode;
using tarmac::Geometry;
using tarmac::GeometryOptions;
using tarmac::Region;
using tarmac::ResizeMode;
using tarmac::SampleError;

namespace {

// Checks that the affine sends the region's corners to the output's corners, which is what
// "region becomes the output" means under the pixel-centre convention.
void check_maps(const Geometry& g, const Region& r) {
  double ox, oy;
  tarmac::apply_affine(g.m, r.x0, r.y0, ox, oy);
  CHECK(ox == Approx(-0.5).margin(1e-9));
  CHECK(oy == Approx(-0.5).margin(1e-9));
  tarmac::apply_affine(g.m, r.x1, r.y1, ox, oy);
  CHECK(ox == Approx(g.out_width - 0.5).margin(1e-9));
  CHECK(oy == Approx(g.out_height - 0.5).margin(1e-9));
  CHECK(g.m[1] == 0);
  CHECK(g.m[3] == 0);
}

}  // namespace

TEST_CASE("geometry: no crop and no resize is the identity") {
  GeometryOptions o;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK(g.identity);
  CHECK(g.out_width == 640);
  CHECK(g.out_height == 480);
  const tarmac::Affine id{1, 0, 0, 0, 1, 0};
  for (int i = 0; i < 6; ++i) CHECK(g.m[i] == Approx(id[i]).margin(1e-12));
}

TEST_CASE("geometry: centre crop of 640x480 to 256 takes the middle 480x480") {
  GeometryOptions o;
  o.crop = CropMode::Center;
  o.resize = ResizeMode::Exact;
  o.width = o.height = 256;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK(g.out_width == 256);
  CHECK(g.out_height == 256);
  CHECK_FALSE(g.identity);
  // By hand: 480 of 640 columns kept, 80 cut on each side; the region's left edge is the
  // left edge of pixel 80, at 79.5. s = 256 / 480; output = (u - 79.5) * s - 0.5.
  const double s = 256.0 / 480.0;
  CHECK(g.m[0] == Approx(s));
  CHECK(g.m[4] == Approx(s));
  CHECK(g.m[2] == Approx(-79.5 * s - 0.5));
  CHECK(g.m[5] == Approx(0.5 * s - 0.5));
  check_maps(g, Region{79.5, -0.5, 559.5, 479.5});
  double ox, oy;
  tarmac::apply_affine(g.m, 319.5, 239.5, ox, oy);  // centre to centre
  CHECK(ox == Approx(127.5));
  CHECK(oy == Approx(127.5));
}

TEST_CASE("geometry: centre crop of a portrait image cuts rows") {
  GeometryOptions o;
  o.crop = CropMode::Center;
  o.resize = ResizeMode::Exact;
  o.width = o.height = 100;
  const Geometry g = compute_geometry(o, 480, 640, std::nullopt);
  check_maps(g, Region{-0.5, 79.5, 479.5, 559.5});
}

TEST_CASE("geometry: centre crop follows the aspect of --size") {
  GeometryOptions o;
  o.crop = CropMode::Center;
  o.resize = ResizeMode::Exact;
  o.width = 300;
  o.height = 100;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  // Aspect 3: all 640 columns, 640 / 3 rows, centred: (480 - 213.33) / 2 = 133.33 cut above.
  const double ch = 640.0 / 3.0;
  check_maps(g, Region{-0.5, (480 - ch) / 2 - 0.5, 639.5, (480 + ch) / 2 - 0.5});
  CHECK(g.out_width == 300);
  CHECK(g.out_height == 100);
}

TEST_CASE("geometry: centre crop without resize keeps the square's pixels") {
  GeometryOptions o;
  o.crop = CropMode::Center;
  const Geometry g = compute_geometry(o, 641, 480, std::nullopt);
  CHECK(g.out_width == 480);
  CHECK(g.out_height == 480);
  CHECK(g.m[0] == Approx(1.0));
  // 161 columns cut: 80.5 each side, region [80, 560] in edge coordinates minus 0.5.
  check_maps(g, Region{80.0, -0.5, 560.0, 479.5});
}

TEST_CASE("geometry: region_from_box reads xywh and xyxy") {
  const double v[4] = {10, 20, 30, 40};
  const Region a = tarmac::region_from_box(v, false);
  CHECK(a.x0 == 10);
  CHECK(a.y0 == 20);
  CHECK(a.x1 == 40);
  CHECK(a.y1 == 60);
  const Region b = tarmac::region_from_box(v, true);
  CHECK(b.x0 == 10);
  CHECK(b.y0 == 20);
  CHECK(b.x1 == 30);
  CHECK(b.y1 == 40);
}

TEST_CASE("geometry: a fixed box without resize keeps its size") {
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  o.box = Region{10, 20, 110, 70};
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK(g.out_width == 100);
  CHECK(g.out_height == 50);
  CHECK(g.m[0] == Approx(1.0));
  CHECK(g.m[2] == Approx(-10.5));
  CHECK(g.m[5] == Approx(-20.5));
  check_maps(g, o.box);
}

TEST_CASE("geometry: a box in edge coordinates (the default) is the numpy slice it names") {
  // [x, y, w, h] = [10, 20, 100, 50]: image[20:70, 10:110], whose outer pixel edges are the
  // centre coordinates 9.5 ... 109.5 and 19.5 ... 69.5.
  GeometryOptions o;
  CHECK(o.box_convention == BoxConvention::Edges);
  o.crop = CropMode::Box;
  o.box = tarmac::region_from_box(std::array<double, 4>{10, 20, 100, 50}.data(), false);
  o.resize = ResizeMode::Exact;
  o.width = 40;
  o.height = 20;
  Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  check_maps(g, Region{9.5, 19.5, 109.5, 69.5});
  // Without a resize, pixel (10, 20) is output pixel (0, 0): an integer shift, no blending.
  o.resize = ResizeMode::None;
  g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK(g.out_width == 100);
  CHECK(g.out_height == 50);
  CHECK(g.m[0] == 1.0);
  CHECK(g.m[2] == Approx(-10).margin(1e-12));
  CHECK(g.m[5] == Approx(-20).margin(1e-12));
  // The same box as a field, and as centres: half a pixel apart.
  o.crop = CropMode::Field;
  const Geometry edges = compute_geometry(o, 640, 480, o.box);
  o.box_convention = BoxConvention::Centers;
  const Geometry centres = compute_geometry(o, 640, 480, o.box);
  CHECK(edges.m[2] == Approx(-10).margin(1e-12));
  CHECK(centres.m[2] == Approx(-10.5).margin(1e-12));
}

TEST_CASE("geometry: crop_scale grows the box about its centre") {
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  o.box = Region{10, 20, 110, 70};            // centre (60, 45), 100 x 50
  o.crop_scale = 2.0;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK(g.out_width == 200);
  CHECK(g.out_height == 100);
  check_maps(g, Region{-40, -5, 160, 95});

  o.crop_scale = 0.5;
  check_maps(compute_geometry(o, 640, 480, std::nullopt), Region{35, 32.5, 85, 57.5});
}

TEST_CASE("geometry: a field box, squared, then scaled") {
  GeometryOptions o;
  o.crop = CropMode::Field;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  o.square = true;
  o.resize = ResizeMode::Exact;
  o.width = o.height = 64;
  const Region box{0, 0, 100, 50};  // centre (50, 25)
  Geometry g = compute_geometry(o, 640, 480, box);
  check_maps(g, Region{0, -25, 100, 75});
  CHECK(g.m[0] == Approx(0.64));
  CHECK(g.m[4] == Approx(0.64));

  // crop_scale applies before squaring: 1.5 x (100 x 50) = 150 x 75, then 150 x 150.
  o.crop_scale = 1.5;
  g = compute_geometry(o, 640, 480, box);
  check_maps(g, Region{-25, -50, 125, 100});

  // A tall box grows sideways.
  o.crop_scale = 1.0;
  g = compute_geometry(o, 640, 480, Region{10, 10, 30, 70});
  check_maps(g, Region{-10, 10, 50, 70});
}

TEST_CASE("geometry: a missing or empty box is a sample error") {
  GeometryOptions o;
  o.crop = CropMode::Field;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, std::nullopt), SampleError);
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, Region{10, 10, 10, 50}), SampleError);
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, Region{10, 10, 50, 10}), SampleError);
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, Region{50, 10, 10, 60}), SampleError);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, Region{nan, 0, 10, 10}), SampleError);
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, Region{0, 0, inf, 10}), SampleError);
  o.crop = CropMode::Box;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  o.box = Region{5, 5, 5, 5};
  CHECK_THROWS_AS(compute_geometry(o, 640, 480, std::nullopt), SampleError);
}

TEST_CASE("geometry: resize modes on a 640x480 image") {
  GeometryOptions o;
  SECTION("shorter side to 256") {
    o.resize = ResizeMode::Shorter;
    o.width = 256;
    const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
    CHECK(g.out_width == 341);  // 640 * 256 / 480 = 341.33
    CHECK(g.out_height == 256);
    check_maps(g, Region{-0.5, -0.5, 639.5, 479.5});
  }
  SECTION("longer side to 256") {
    o.resize = ResizeMode::Longer;
    o.width = 256;
    const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
    CHECK(g.out_width == 256);
    CHECK(g.out_height == 192);
    CHECK(g.m[0] == Approx(0.4));
    check_maps(g, Region{-0.5, -0.5, 639.5, 479.5});
  }
  SECTION("fit into 200x200") {
    o.resize = ResizeMode::Fit;
    o.width = o.height = 200;
    const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
    CHECK(g.out_width == 200);
    CHECK(g.out_height == 150);
  }
  SECTION("fit into 400x100: the height binds") {
    o.resize = ResizeMode::Fit;
    o.width = 400;
    o.height = 100;
    const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
    CHECK(g.out_width == 133);  // 640 * 100 / 480 = 133.33
    CHECK(g.out_height == 100);
  }
  SECTION("exact 100x30 stretches") {
    o.resize = ResizeMode::Exact;
    o.width = 100;
    o.height = 30;
    const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
    CHECK(g.out_width == 100);
    CHECK(g.out_height == 30);
    CHECK(g.m[0] == Approx(100.0 / 640));
    CHECK(g.m[4] == Approx(30.0 / 480));
    check_maps(g, Region{-0.5, -0.5, 639.5, 479.5});
  }
  SECTION("shorter side of a portrait image") {
    o.resize = ResizeMode::Shorter;
    o.width = 240;
    const Geometry g = compute_geometry(o, 480, 640, std::nullopt);
    CHECK(g.out_width == 240);
    CHECK(g.out_height == 320);
  }
  SECTION("sizes never round to zero") {
    o.resize = ResizeMode::Longer;
    o.width = 1;
    const Geometry g = compute_geometry(o, 640, 2, std::nullopt);
    CHECK(g.out_width == 1);
    CHECK(g.out_height == 1);
  }
}

TEST_CASE("geometry: a box crop resized to its shorter side") {
  GeometryOptions o;
  o.crop = CropMode::Box;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  o.box = Region{100.5, 50.5, 300.5, 150.5};  // 200 x 100
  o.resize = ResizeMode::Shorter;
  o.width = 50;
  const Geometry g = compute_geometry(o, 640, 480, std::nullopt);
  CHECK(g.out_width == 100);
  CHECK(g.out_height == 50);
  CHECK(g.m[0] == Approx(0.5));  // 50 / 100
  CHECK(g.m[2] == Approx(-100.5 * 0.5 - 0.5));
  check_maps(g, o.box);
}

TEST_CASE("geometry: aspect buckets at 1024^2 / 64 are SDXL's") {
  const auto b = tarmac::aspect_buckets(1024 * 1024, 64, 4.0);
  // Landscape: every width from 1024 to 2048 in steps of 64 with its tallest height, all of
  // them in SDXL's published list of training buckets; portrait: the same transposed.
  const std::vector<std::pair<int, int>> landscape{
      {1024, 1024}, {1088, 960}, {1152, 896}, {1216, 832}, {1280, 768}, {1344, 768},
      {1408, 704},  {1472, 704}, {1536, 640}, {1600, 640}, {1664, 576}, {1728, 576},
      {1792, 576},  {1856, 512}, {1920, 512}, {1984, 512}, {2048, 512}};
  std::vector<std::pair<int, int>> want = landscape;
  for (auto [w, h] : landscape)
    if (w != h) want.emplace_back(h, w);
  std::sort(want.begin(), want.end());
  CHECK(b == want);
  CHECK(tarmac::aspect_buckets(32 * 32, 64, 4.0).empty());
  CHECK(tarmac::aspect_buckets(64 * 64, 64, 1.0) == std::vector<std::pair<int, int>>{{64, 64}});
  const auto narrow = tarmac::aspect_buckets(1024 * 1024, 64, 1.5);
  CHECK(narrow.front() == std::pair{832, 1216});  // 1.46; 1280 x 768 would be 1.67
  CHECK(narrow.back() == std::pair{1216, 832});
}

TEST_CASE("geometry: aspect buckets equal a brute-force enumeration, large areas quickly") {
  // The definition, every width from step up: the tallest height that fits, landscape pairs
  // within the ratio, and their transposes.
  auto brute = [](int64_t area, int step, double ratio) {
    std::vector<std::pair<int, int>> out;
    for (int64_t w = step; w * step <= area; w += step) {
      const int64_t h = area / w / step * step;
      if (h >= step && h <= w && double(w) <= ratio * double(h)) {
        out.emplace_back(int(w), int(h));
        if (w != h) out.emplace_back(int(h), int(w));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  for (int64_t side : {1, 7, 63, 64, 65, 100, 255, 512, 1000, 1024, 1536, 4093})
    for (int step : {1, 8, 32, 64, 100})
      for (double ratio : {1.0, 1.5, 2.0, 4.0, 9.5}) {
        INFO(side << " " << step << " " << ratio);
        CHECK(tarmac::aspect_buckets(side * side, step, ratio) == brute(side * side, step, ratio));
      }
  // 65535^2 with step 1 and ratio 64 stays a loop over ~0.5 M widths, not 4 * 10^9.
  CHECK(tarmac::aspect_buckets(int64_t{65535} * 65535, 1, 64).size() > 100000);
}

TEST_CASE("geometry: an image goes to the bucket of the closest aspect ratio") {
  const auto b = tarmac::aspect_buckets(1024 * 1024, 64, 4.0);
  CHECK(tarmac::choose_bucket(b, 1280, 720) == std::pair{1344, 768});  // 16:9 -> 1.75
  CHECK(tarmac::choose_bucket(b, 720, 1280) == std::pair{768, 1344});
  CHECK(tarmac::choose_bucket(b, 500, 500) == std::pair{1024, 1024});
  CHECK(tarmac::choose_bucket(b, 10000, 100) == std::pair{2048, 512});  // clamped to the widest
  // Equally far in log scale from 1x1 and 4x1: the larger area wins, whatever the order.
  const std::vector<std::pair<int, int>> tie{{4, 1}, {2, 2}, {1, 1}};
  CHECK(tarmac::choose_bucket(tie, 2, 1) == std::pair{2, 2});
}

TEST_CASE("geometry: bucket resize cuts the image to its bucket's aspect, centred") {
  GeometryOptions o;
  o.resize = ResizeMode::Bucket;
  o.width = o.height = 1024;
  for (CropMode crop : {CropMode::None, CropMode::Center}) {
    o.crop = crop;
    const Geometry g = compute_geometry(o, 1280, 720, std::nullopt);
    CHECK(g.out_width == 1344);
    CHECK(g.out_height == 768);
    // 1.75 * 720 = 1260 of the 1280 columns, centred: x in [9.5, 1269.5]
    check_maps(g, Region{9.5, -0.5, 1269.5, 719.5});
  }
  // A box region is bucketed by its own aspect ratio.
  o.crop = CropMode::Box;
  o.box_convention = BoxConvention::Centers;  // the maths below is in centres
  o.box = Region{100, 100, 300, 700};         // 200 x 600 = 1:3 -> 576 x 1728, exactly 1:3
  const Geometry g = compute_geometry(o, 1280, 720, std::nullopt);
  CHECK(g.out_width == 576);
  CHECK(g.out_height == 1728);
  check_maps(g, o.box);
}
