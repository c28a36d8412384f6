// The augmentation's parameters and geometry (read/augment.h), and BatchLoader applying them.
#include "read/augment.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numbers>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "dataset_fixture.h"
#include "read/batch_loader.h"
#include "support/values.h"

using namespace tarmac;
using namespace tarmac::test;

namespace {
std::array<double, 2> apply(const std::array<double, 6>& m, double x, double y) {
  return {m[0] * x + m[1] * y + m[2], m[3] * x + m[4] * y + m[5]};
}
}  // namespace

TEST_CASE("draws are a pure function of (seed, epoch, index, k), uniform in [0, 1)") {
  CHECK(augment_uniform(1, 2, 3, 4) == augment_uniform(1, 2, 3, 4));
  CHECK(augment_uniform(1, 2, 3, 4) != augment_uniform(1, 3, 3, 4));
  CHECK(augment_uniform(1, 2, 3, 4) != augment_uniform(1, 2, 4, 4));
  CHECK(augment_uniform(1, 2, 3, 4) != augment_uniform(2, 2, 3, 4));
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = augment_uniform(0, 0, i, 0);
    REQUIRE(u >= 0);
    REQUIRE(u < 1);
    sum += u;
  }
  CHECK(std::abs(sum / 10000 - 0.5) < 0.02);
}

TEST_CASE("no randomness maps the stored image onto the output like format.md's crop map") {
  Augment a;
  a.width = 64;
  a.height = 48;
  const AugmentDraw d = draw_augment(a, 32, 24, 7, 1, 5);
  CHECK_FALSE(d.flip);
  // [-0.5, 31.5] -> [-0.5, 63.5]: x' = 2x + 0.5
  CHECK(d.m[0] == Approx(2));
  CHECK(d.m[2] == Approx(0.5));
  CHECK(d.m[4] == Approx(2));
  CHECK(d.m[1] == 0);
  CHECK(d.m[3] == 0);
  const AugmentDraw same = draw_augment(a, 64, 48, 7, 1, 5);
  for (int k : {0, 4}) CHECK(same.m[k] == Approx(1));
  for (int k : {1, 2, 3, 5}) CHECK(same.m[k] == Approx(0).margin(1e-12));
}

TEST_CASE("a flip mirrors about the output's centre; a rotation keeps the centre") {
  Augment a;
  a.width = a.height = 10;
  a.flip = 1;
  AugmentDraw d = draw_augment(a, 10, 10, 0, 0, 0);
  CHECK(d.flip);
  auto p = apply(d.m, 2, 3);
  CHECK(p[0] == Approx(7));
  CHECK(p[1] == Approx(3));
  a.flip = 0;
  a.rotate = 90;
  a.scale_min = 0.5;
  a.scale_max = 2;
  for (uint64_t i = 0; i < 20; ++i) {
    d = draw_augment(a, 10, 10, 3, 0, i);
    CHECK(std::abs(d.angle) <= 90);
    CHECK(d.scale >= 0.5);
    CHECK(d.scale <= 2);
    p = apply(d.m, 4.5, 4.5);
    CHECK(p[0] == Approx(4.5));
    CHECK(p[1] == Approx(4.5));
    // Scale is the determinant's square root; angle the direction of the x axis.
    CHECK(std::sqrt(d.m[0] * d.m[4] - d.m[1] * d.m[3]) == Approx(d.scale));
  }
}

TEST_CASE("a random resized crop lies inside the image with the area and ratio asked") {
  Augment a;
  a.width = a.height = 16;
  a.crop = true;
  a.crop_min = 0.25;
  a.crop_max = 0.5;
  for (uint64_t i = 0; i < 200; ++i) {
    const AugmentDraw d = draw_augment(a, 100, 80, 0, 0, i);
    REQUIRE(d.crop_x >= 0);
    REQUIRE(d.crop_y >= 0);
    REQUIRE(d.crop_x + d.crop_w <= 100);
    REQUIRE(d.crop_y + d.crop_h <= 80);
    const double area = double(d.crop_w) * d.crop_h / 8000;
    CHECK(area > 0.23);
    CHECK(area < 0.52);
    const double ratio = double(d.crop_w) / d.crop_h;
    CHECK(ratio > 0.7);
    CHECK(ratio < 1.4);
    // The crop's corners go to the output's.
    auto p = apply(d.m, d.crop_x - 0.5, d.crop_y - 0.5);
    CHECK(p[0] == Approx(-0.5));
    CHECK(p[1] == Approx(-0.5));
  }
  // No try fits (an area fraction of 1 at ratio 4 in a square): the centre fallback.
  a.crop_min = a.crop_max = 1;
  a.ratio_min = a.ratio_max = 4;
  const AugmentDraw d = draw_augment(a, 40, 40, 0, 0, 0);
  CHECK(d.crop_w == 40);
  CHECK(d.crop_h == 10);
  CHECK(d.crop_y == 15);
}

TEST_CASE("points follow the map with flip pairs swapped; boxes become their corners' box") {
  Augment a;
  a.width = a.height = 10;
  a.flip = 1;
  a.flip_pairs = {{0, 2}};
  const AugmentDraw d = draw_augment(a, 10, 10, 0, 0, 0);
  std::vector<double> pts{1, 1, 1, 5, 5, 2, 8, 8, 3};  // [3, 3]: x, y, visibility
  const int64_t shape[] = {3, 3};
  augment_points(d, a, DType::F64, shape, bytes_of(pts));
  CHECK(pts == std::vector<double>{1, 8, 3, 4, 5, 2, 8, 1, 1});
  std::vector<float> box{1, 2, 3, 4, 0.5f};
  const int64_t bshape[] = {5};
  augment_boxes(d, DType::F32, bshape, false, false, bytes_of(box));
  CHECK(box == std::vector<float>{5, 2, 3, 4, 0.5f});  // centres: x -> 9 - x
  // Pixel edges (--box-convention edges): a 10-pixel-wide flip is x -> 10 - x, so the box that
  // covered pixels 1..3 covers 6..8, its pixels' mirror images.
  std::vector<double> edge_box{1, 2, 3, 4};
  const int64_t eshape[] = {4};
  augment_boxes(d, DType::F64, eshape, false, true, bytes_of(edge_box));
  CHECK(edge_box == std::vector<double>{6, 2, 3, 4});
  std::vector<double> edge_xyxy{1, 2, 4, 6};
  augment_boxes(d, DType::F64, eshape, true, true, bytes_of(edge_xyxy));
  CHECK(edge_xyxy == std::vector<double>{6, 2, 9, 6});
  std::vector<int64_t> ints{1, 2};
  const int64_t ishape[] = {2};
  CHECK_THROWS_AS(augment_points(d, a, DType::I64, ishape, bytes_of(ints)), ArgumentError);
}

TEST_CASE("bad augment parameters are refused, naming the parameter") {
  Augment a;
  CHECK_THROWS_WITH(check_augment(a), Catch::Contains("size"));
  a.width = a.height = 8;
  check_augment(a);
  Augment b = a;
  b.flip = 1.5;
  CHECK_THROWS_WITH(check_augment(b), Catch::Contains("flip"));
  b = a;
  b.scale_min = 2;
  CHECK_THROWS_WITH(check_augment(b), Catch::Contains("scale"));
  b = a;
  b.crop = true;
  b.crop_max = 1.5;
  CHECK_THROWS_WITH(check_augment(b), Catch::Contains("crop"));
  b = a;
  b.translate = NAN;
  CHECK_THROWS_WITH(check_augment(b), Catch::Contains("translate"));
}

TEST_CASE("Augment rotate=1e308 is refused: every parameter finite and in its documented range") {
  Augment a;
  a.width = a.height = 8;
  const auto refused = [&](auto set, const char* name) {
    Augment b = a;
    set(b);
    CHECK_THROWS_WITH(check_augment(b), Catch::Contains(name));
  };
  refused([](Augment& b) { b.rotate = 1e308; }, "rotate");
  refused([](Augment& b) { b.rotate = INFINITY; }, "rotate");
  refused([](Augment& b) { b.rotate = 180.5; }, "rotate");
  refused([](Augment& b) { b.scale_max = 1e308; }, "scale");
  refused([](Augment& b) { b.translate = 1e308; }, "translate");
  refused([](Augment& b) { b.fill = 256; }, "fill");
  refused([](Augment& b) { b.crop = true, b.ratio_max = 1e308; }, "ratio");
  refused([](Augment& b) { b.crop = true, b.ratio_min = 1e-308; }, "ratio");
  Augment edge = a;
  edge.rotate = kMaxRotate;
  edge.scale_max = kMaxScale;
  edge.translate = kMaxTranslate;
  check_augment(edge);
}

template <class T>
bool close(const std::vector<T>& a, const std::vector<T>& b) {  // cos(90 degrees) is 6e-17
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(double(a[i]) - double(b[i])) > 1e-6) return false;
  return true;
}

TEST_CASE("3D labels follow a flip and a rotation: points3d, axis-angle, camera") {
  AugmentDraw d;
  d.flip = true;
  d.angle = 90;  // Rz's xy block [[0, 1], [-1, 0]]; G = Rz S maps (x, y, z) to (y, x, z)
  // M: a flip of a 10-pixel-wide output then the rotation, as the 2D points see it.
  d.m = {0, 1, 0, 1, 0, 0};
  Augment a;
  a.flip_pairs = {{0, 1}};
  std::vector<double> p3{1, 2, 3, 9, 4, 5, 6, 8};  // two points of x, y, z, confidence
  const int64_t shape[] = {2, 4};
  augment_points3d(d, a, DType::F64, shape, bytes_of(p3));
  // Each point (x, y, z) -> (y, x, z) by G, then the pair swapped; confidence kept.
  CHECK(close(p3, {5, 4, 6, 8, 2, 1, 3, 9}));
  // A root about z by 0.5 rad: mirrored (x, -y, -z) then premultiplied by Rz: about z, by
  // -0.5 - 90 degrees (Rz is -90 degrees about z in the right-handed sense).
  std::vector<double> root{0, 0, 0.5};
  augment_axis_angle(d, DType::F64, 1, {}, true, bytes_of(root));
  const double want = -(0.5 + std::numbers::pi / 2);
  CHECK(std::abs(root[0]) < 1e-12);
  CHECK(std::abs(root[1]) < 1e-12);
  CHECK(std::abs(root[2] - want) < 1e-12);
  // Body joints: permuted and mirrored, never rotated.
  std::vector<float> body{1, 2, 3, 4, 5, 6};
  const std::pair<int, int> swap[] = {{0, 1}};
  augment_axis_angle(d, DType::F32, 2, swap, false, bytes_of(body));
  CHECK(close(body, {4, -5, -6, 1, -2, -3}));
  // Camera: K' = A K G^T; the principal point moves by M, focal lengths stay positive.
  std::vector<double> k{50, 0, 3, 0, 40, 2, 0, 0, 1};
  augment_camera(d, DType::F64, true, false, bytes_of(k));
  CHECK(close(k, {40, 0, 2, 0, 50, 3, 0, 0, 1}));
  std::vector<double> k4{50, 50, 3, 2};
  augment_camera(d, DType::F64, false, false, bytes_of(k4));
  CHECK(close(k4, {50, 50, 2, 3}));
}

TEST_CASE("flip_pairs naming an index twice are refused, naming the pair") {
  Augment a;
  a.width = a.height = 8;
  a.flip_pairs = {{1, 2}, {2, 3}};
  CHECK_THROWS_WITH(check_augment(a), Catch::Contains("(2, 3)") && Catch::Contains("(1, 2)"));
  a.flip_pairs = {{4, 4}};
  CHECK_THROWS_WITH(check_augment(a), Catch::Contains("(4, 4)"));
  a.flip_pairs = {{1, 2}, {3, 4}};
  check_augment(a);
}

TEST_CASE("an augmented batch is the stored image warped once, the same on any thread count") {
  const Dataset ds(fixture_dataset());
  Augment a;
  a.width = 20;
  a.height = 16;
  a.flip = 0.5;
  a.rotate = 20;
  a.scale_min = 0.8;
  a.scale_max = 1.2;
  a.translate = 0.1;
  const std::vector<int64_t> idx{3, 0, 11, 7};
  const size_t img = 20 * 16 * 3;
  std::vector<uint8_t> images[2];
  std::vector<double> vec[2], m[2];
  for (int t : {1, 2}) {
    BatchOptions o;
    o.threads = t;
    o.fields = {"vec", "__augment__"};
    o.points = std::vector<std::string>{"vec"};
    o.augment = a;
    BatchLoader loader(ds, o);
    auto& im = images[t - 1];
    im.resize(idx.size() * img);
    vec[t - 1].resize(idx.size() * 3);
    m[t - 1].resize(idx.size() * 6);
    loader.load(idx, {im, {bytes_of(vec[t - 1]), bytes_of(m[t - 1])}}, 9, 4);
  }
  CHECK(images[0] == images[1]);
  CHECK(vec[0] == vec[1]);
  for (size_t j = 0; j < idx.size(); ++j) {
    const auto i = static_cast<size_t>(idx[j]);
    const AugmentDraw d = draw_augment(a, kWidth, kHeight, 9, 4, i);
    for (int k = 0; k < 6; ++k) CHECK(m[0][6 * j + k] == d.m[k]);
    Pixels p = ds.decode(i);
    cv::Mat src(p.height, p.width, CV_8UC3, p.data.data()), want;
    cv::warpAffine(src, want, cv::Mat(2, 3, CV_64F, const_cast<double*>(d.m.data())),
                   cv::Size(20, 16), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(0));
    CHECK(std::memcmp(want.data, images[0].data() + j * img, img) == 0);
    const auto xy = apply(d.m, 1.5 * double(i), -double(i));
    CHECK(vec[0][3 * j] == Approx(xy[0]));
    CHECK(vec[0][3 * j + 1] == Approx(xy[1]));
    CHECK(vec[0][3 * j + 2] == 2);
  }
}

namespace {
// The oracle: OpenCV's SVD for the scale, and every output pixel centre mapped back by
// OpenCV's inverse to see which scaled pixels its bilinear taps read.
void check_source(const std::array<double, 6>& m, int out_w, int out_h, int src_w, int src_h,
                  int max_denom, int want_denom) {
  const AugmentSource s = augment_source(m, out_w, out_h, src_w, src_h, max_denom);
  cv::Mat w;
  cv::SVD::compute(cv::Matx22d(m[0], m[1], m[3], m[4]), w);
  const double sigma = w.at<double>(0);
  CHECK(s.denom == want_denom);
  if (s.denom > 1) CHECK(s.denom * sigma <= 1 + 1e-9);  // at full scale the warp may enlarge
  if (s.denom < max_denom) CHECK(2 * s.denom * sigma > 1);
  const int sw = (src_w + s.denom - 1) / s.denom, sh = (src_h + s.denom - 1) / s.denom;
  cv::Matx23d inv;
  cv::invertAffineTransform(cv::Matx23d(m.data()), inv);
  int lo_x = sw, lo_y = sh, hi_x = -1, hi_y = -1;  // taps inside the scaled image
  for (int oy = 0; oy < out_h; ++oy)
    for (int ox = 0; ox < out_w; ++ox) {
      const double u = inv(0, 0) * ox + inv(0, 1) * oy + inv(0, 2);
      const double v = inv(1, 0) * ox + inv(1, 1) * oy + inv(1, 2);
      const double px = (u + 0.5) / s.denom - 0.5, py = (v + 0.5) / s.denom - 0.5;
      for (const double tx : {std::floor(px), std::floor(px) + 1})
        for (const double ty : {std::floor(py), std::floor(py) + 1}) {
          if (tx < 0 || ty < 0 || tx >= sw || ty >= sh) continue;
          lo_x = std::min(lo_x, int(tx)), hi_x = std::max(hi_x, int(tx));
          lo_y = std::min(lo_y, int(ty)), hi_y = std::max(hi_y, int(ty));
        }
    }
  if (hi_x < 0) {
    CHECK(s.empty());
    return;
  }
  // Every tap inside, and no more than one pixel more on each side.
  CHECK(s.x0 <= lo_x);
  CHECK(s.x0 >= lo_x - 2);
  CHECK(s.x1 > hi_x);
  CHECK(s.x1 <= hi_x + 3);
  CHECK(s.y0 <= lo_y);
  CHECK(s.y0 >= lo_y - 2);
  CHECK(s.y1 > hi_y);
  CHECK(s.y1 <= hi_y + 3);
  CHECK(s.x0 >= 0);
  CHECK(s.y0 >= 0);
  CHECK(s.x1 <= sw);
  CHECK(s.y1 <= sh);
}
}  // namespace

TEST_CASE("the source of a warp: the smallest DCT scale that still shrinks, the taps' rect") {
  // The whole image, same size: full scale, every pixel.
  check_source({1, 0, 0, 0, 1, 0}, 100, 80, 100, 80, 8, 1);
  // A quarter of the size: 1/4 scale, the whole scaled image (25 x 20).
  const double q = 0.25;
  check_source({q, 0, q * 0.5 - 0.5, 0, q, q * 0.5 - 0.5}, 25, 20, 100, 80, 8, 4);
  // Shrinking by 1/3: 1/2 leaves 2/3 to the warp, 1/4 would enlarge 4/3.
  const double t = 1.0 / 3;
  check_source({t, 0, 0, 0, t, 0}, 30, 30, 90, 90, 8, 2);
  check_source({t, 0, 0, 0, t, 0}, 30, 30, 90, 90, 1, 1);  // PNG: no DCT scale
  // A crop: columns 200..327, rows 100..227 of a 512 image to 32 x 32 (1/4), plus a flip.
  check_source({-q, 0, q * 327.5 - 0.5, 0, q, -q * 99.5 - 0.5}, 32, 32, 512, 512, 8, 4);
  // Anisotropic (a random resized crop): the larger scale decides.
  check_source({0.2, 0, -10, 0, 0.45, -40}, 64, 48, 640, 480, 8, 2);
  // Rotated 30 degrees at 0.3 and shifted: 1/2 scale, a rect grown by the rotation.
  const double c = 0.3 * std::cos(std::numbers::pi / 6), sn = 0.3 * std::sin(std::numbers::pi / 6);
  check_source({c, sn, -40, -sn, c, 30}, 96, 64, 500, 375, 8, 2);
  check_source({c, sn, -40, -sn, c, 30}, 96, 64, 500, 375, 2, 2);
  // Enlarging 3x: full scale, only the pixels the output sees.
  check_source({3, 0, -60, 0, 3, -90}, 48, 48, 100, 100, 8, 1);
  // The output lies wholly outside the image.
  check_source({1, 0, 500, 0, 1, 0}, 20, 20, 100, 100, 8, 1);
  CHECK(augment_source({1, 0, 500, 0, 1, 0}, 20, 20, 100, 100, 8).empty());
}

TEST_CASE("flip_pairs out of range for a points field is refused before any batch") {
  const Dataset ds(fixture_dataset());
  BatchOptions o;
  o.fields = {"vec"};
  o.points = std::vector<std::string>{"vec"};
  o.augment = Augment{};
  o.augment->width = o.augment->height = 8;
  o.augment->flip_pairs = {{0, 1}};
  CHECK_THROWS_WITH(BatchLoader(ds, o), Catch::Contains("flip_pairs"));
  o.points = std::vector<std::string>{"nope"};
  CHECK_THROWS_AS(BatchLoader(ds, o), ArgumentError);
}

TEST_CASE("a 16-bit PNG dense map is warped nearest in its dtype, as cv::warpAffine") {
  const Dataset ds(fixture_dataset());
  Augment a;
  a.width = 20;
  a.height = 16;
  a.flip = 0.5;
  a.rotate = 30;
  a.scale_min = 0.7;
  a.scale_max = 1.3;
  BatchOptions o;
  o.threads = 2;
  o.fields = {"__depth__"};
  o.augment = a;
  BatchLoader loader(ds, o);
  const TensorView layout = loader.field_layout(0);
  CHECK(layout.dtype == DType::U16);
  REQUIRE(layout.shape.ndim == 2);
  CHECK((layout.shape[0] == 16 && layout.shape[1] == 20));
  const std::vector<int64_t> idx{5, 0, 11, 5};
  std::vector<uint8_t> images(idx.size() * 20 * 16 * 3);
  std::vector<uint16_t> depth(idx.size() * 20 * 16);
  loader.load(idx, {images, {bytes_of(depth)}}, 3, 1);
  for (size_t j = 0; j < idx.size(); ++j) {
    // The fixture's map, from make_datasets.py's formula (not decoded by tarmac): 1000K + 32y + x.
    cv::Mat src(kHeight, kWidth, CV_16UC1), want;
    for (int y = 0; y < kHeight; ++y)
      for (int x = 0; x < kWidth; ++x)
        src.at<uint16_t>(y, x) = static_cast<uint16_t>(1000 * idx[j] + 32 * y + x);
    const AugmentDraw d = draw_augment(a, kWidth, kHeight, 3, 1, size_t(idx[j]));
    cv::warpAffine(src, want, cv::Mat(2, 3, CV_64F, const_cast<double*>(d.m.data())),
                   cv::Size(20, 16), cv::INTER_NEAREST, cv::BORDER_CONSTANT, cv::Scalar::all(0));
    CHECK(std::memcmp(want.data, depth.data() + j * 20 * 16, 20 * 16 * 2) == 0);
  }
}
