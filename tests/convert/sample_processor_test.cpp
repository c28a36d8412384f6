#include "convert/sample_processor.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <opencv2/imgcodecs.hpp>
#include <string>

using namespace tarmac;

namespace {

// An 8 x 6 RGB image whose pixel (x, y) is (10x, 20y, 7): PNG bytes.
std::vector<uint8_t> png_8x6() {
  cv::Mat bgr(6, 8, CV_8UC3);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x) bgr.at<cv::Vec3b>(y, x) = cv::Vec3b(7, 20 * y, 10 * x);
  std::vector<uint8_t> out;
  REQUIRE(cv::imencode(".png", bgr, out));
  return out;
}

std::vector<uint8_t> text(const std::string& s) {
  return {s.begin(), s.end()};
}

RawSample raw(std::vector<Member> members) {
  RawSample r;
  r.key = "k/0";
  r.members = std::move(members);
  return r;
}

const SampleField* field(const ProcessedSample& s, const std::string& name) {
  for (const auto& f : s.fields)
    if (f.name == name) return &f;
  return nullptr;
}

// The values of a field as doubles (F32, F64 or I64 storage).
std::vector<double> values(const SampleField& f) {
  std::vector<double> out;
  const size_t size = dtype_size(f.value.dtype);
  for (size_t at = 0; at + size <= f.value.data.size(); at += size) {
    const uint8_t* p = f.value.data.data() + at;
    if (f.value.dtype == DType::F32) {
      float v;
      std::memcpy(&v, p, 4);
      out.push_back(v);
    } else if (f.value.dtype == DType::F64) {
      double v;
      std::memcpy(&v, p, 8);
      out.push_back(v);
    } else if (f.value.dtype == DType::I64) {
      int64_t v;
      std::memcpy(&v, p, 8);
      out.push_back(static_cast<double>(v));
    }
  }
  return out;
}

SampleRecipe png_options() {
  SampleRecipe o;
  o.transform.format = OutputFormat::Png;  // lossless: the stored pixels can be compared exactly
  return o;
}

}  // namespace

TEST_CASE("process_sample: no geometry keeps every pixel and every label value") {
  const RawSample r =
      raw({{"k/0.png", png_8x6()}, {"k/0.json", text(R"({"id": 7, "pts": [[1, 2], [3, 4]]})")}});
  const ProcessedSample s = process_sample(r, png_options());
  REQUIRE(s.error.empty());
  CHECK(s.key == "k/0");
  CHECK(s.image.width == 8);
  CHECK(s.image.height == 6);
  const cv::Mat back = cv::imdecode(s.image.bytes, cv::IMREAD_COLOR);
  REQUIRE(back.cols == 8);
  REQUIRE(back.rows == 6);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x) REQUIRE(back.at<cv::Vec3b>(y, x) == cv::Vec3b(7, 20 * y, 10 * x));
  CHECK(s.affine == Affine{1, 0, 0, 0, 1, 0});
  const SampleField* id = field(s, "id");
  REQUIRE(id);
  CHECK(values(*id) == std::vector<double>{7});
  const SampleField* pts = field(s, "pts");
  REQUIRE(pts);
  CHECK(pts->value.shape == std::vector<int64_t>{2, 2});
  CHECK(values(*pts) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("process_sample: --size halves the image, the affine and the --points with it") {
  SampleRecipe o = png_options();
  o.transform.geometry.width = 4;
  o.transform.geometry.height = 3;
  o.transform.geometry.resize = ResizeMode::Exact;
  o.transform.points = {"pts"};
  const RawSample r =
      raw({{"k/0.png", png_8x6()}, {"k/0.json", text(R"({"pts": [[1, 2], [3, 4]]})")}});
  const ProcessedSample s = process_sample(r, o);
  REQUIRE(s.error.empty());
  CHECK(s.image.width == 4);
  CHECK(s.image.height == 3);
  // format.md 3: the whole image [-0.5, 7.5] x [-0.5, 5.5] onto [-0.5, 3.5] x [-0.5, 2.5]:
  // x' = 0.5 x - 0.25, y' = 0.5 y - 0.25.
  CHECK(s.affine[0] == 0.5);
  CHECK(s.affine[1] == 0);
  CHECK(s.affine[2] == -0.25);
  CHECK(s.affine[4] == 0.5);
  CHECK(s.affine[5] == -0.25);
  const SampleField* pts = field(s, "pts");
  REQUIRE(pts);
  const std::vector<double> v = values(*pts);
  REQUIRE(v.size() == 4);
  CHECK(v[0] == Approx(0.25));
  CHECK(v[1] == Approx(0.75));
  CHECK(v[2] == Approx(1.25));
  CHECK(v[3] == Approx(1.75));
}

TEST_CASE("process_sample: a bad sample says why, with its code, and never throws") {
  SECTION("no image") {
    const ProcessedSample s = process_sample(raw({{"k/0.json", text("{}")}}), png_options());
    CHECK(s.error_code == ErrorCode::NoImage);
    CHECK(!s.error.empty());
  }
  SECTION("a label that is not JSON") {
    const ProcessedSample s = process_sample(
        raw({{"k/0.png", png_8x6()}, {"k/0.json", text("{\"id\": ")}}), png_options());
    CHECK(s.error_code == ErrorCode::BadJson);
    CHECK(s.error.find("k/0.json") != std::string::npos);
  }
  SECTION("an image that does not decode") {
    const ProcessedSample s = process_sample(raw({{"k/0.png", text("not a png")}}), png_options());
    CHECK(s.error_code == ErrorCode::BadImage);
    CHECK(s.error.find("k/0.png") != std::string::npos);
  }
  SECTION("a --points field that is missing") {
    SampleRecipe o = png_options();
    o.transform.points = {"kp"};
    const ProcessedSample s =
        process_sample(raw({{"k/0.png", png_8x6()}, {"k/0.json", text("{\"id\": 1}")}}), o);
    CHECK(s.error_code == ErrorCode::BadField);
    CHECK(s.error.find("kp") != std::string::npos);
  }
}

TEST_CASE("process_sample: a member neither image nor label is ignored, with its code") {
  const ProcessedSample s =
      process_sample(raw({{"k/0.png", png_8x6()}, {"k/0.xyz", text("?")}}), png_options());
  REQUIRE(s.error.empty());
  REQUIRE(s.ignored.size() == 1);
  CHECK(s.ignored[0].member == "k/0.xyz");
  CHECK(s.ignored[0].code == ErrorCode::UnusedMember);
}
