#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "transform/image_codec.h"

using tarmac::decode_dense;
using tarmac::decode_image;
using tarmac::ImageFormat;
using tarmac::OutputFormat;
using tarmac::ParseError;
using tarmac::probe_image;

namespace {

constexpr uint64_t kMaxPixels = 1ull << 28;

std::vector<uint8_t> encode(const cv::Mat& m, const std::string& ext,
                            const std::vector<int>& params = {}) {
  std::vector<uint8_t> out;
  REQUIRE(cv::imencode(ext, m, out, params));
  return out;
}

cv::Mat noise_image(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  cv::randu(m, cv::Scalar::all(0), cv::Scalar::all(256));
  return m;
}

// Black picture with an 8x8 red block at the top left (JPEG blocks keep flat colours).
cv::Mat marked_image(int w, int h) {
  cv::Mat m(h, w, CV_8UC3, cv::Scalar(0, 0, 0));
  m(cv::Rect(0, 0, 8, 8)).setTo(cv::Scalar(0, 0, 255));
  return m;
}

bool is_red(const cv::Vec3b& p) {
  return p[2] > 200 && p[1] < 60 && p[0] < 60;
}
bool is_black(const cv::Vec3b& p) {
  return p[2] < 60 && p[1] < 60 && p[0] < 60;
}

// A JPEG APP1 segment with an Exif IFD0 holding one Orientation (0x0112) SHORT entry.
std::vector<uint8_t> exif_segment(int orientation, bool little_endian) {
  std::vector<uint8_t> tiff;
  tiff.reserve(26);  // the whole TIFF block: GCC 12 at -O3 warns falsely on push_back's regrowth
  auto u16 = [&](unsigned v) {
    if (little_endian) {
      tiff.push_back(v & 0xFF);
      tiff.push_back((v >> 8) & 0xFF);
    } else {
      tiff.push_back((v >> 8) & 0xFF);
      tiff.push_back(v & 0xFF);
    }
  };
  auto u32 = [&](uint32_t v) {
    if (little_endian) {
      u16(v & 0xFFFF);
      u16(v >> 16);
    } else {
      u16(v >> 16);
      u16(v & 0xFFFF);
    }
  };
  if (little_endian)
    tiff.insert(tiff.end(), {'I', 'I', 42, 0});
  else
    tiff.insert(tiff.end(), {'M', 'M', 0, 42});
  u32(8);       // offset of IFD0
  u16(1);       // one entry
  u16(0x0112);  // Orientation
  u16(3);       // SHORT
  u32(1);       // count
  u16(static_cast<unsigned>(orientation));
  u16(0);  // value padding to 4 bytes
  u32(0);  // no next IFD
  std::vector<uint8_t> seg = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  seg.insert(seg.end(), tiff.begin(), tiff.end());
  const size_t len = seg.size() - 2;
  seg[2] = static_cast<uint8_t>(len >> 8);
  seg[3] = static_cast<uint8_t>(len & 0xFF);
  return seg;
}

std::vector<uint8_t> with_exif(std::vector<uint8_t> jpeg, int orientation, bool le) {
  const auto seg = exif_segment(orientation, le);
  jpeg.insert(jpeg.begin() + 2, seg.begin(), seg.end());  // right after SOI
  return jpeg;
}

}  // namespace

TEST_CASE("probe_image: format and stored size of each format") {
  const cv::Mat img = noise_image(37, 23);
  struct Case {
    const char* ext;
    std::vector<int> params;
    ImageFormat format;
  };
  const Case cases[] = {
      {".jpg", {}, ImageFormat::Jpeg},
      {".png", {}, ImageFormat::Png},
      {".webp", {cv::IMWRITE_WEBP_QUALITY, 80}, ImageFormat::Webp},   // lossy: VP8
      {".webp", {cv::IMWRITE_WEBP_QUALITY, 101}, ImageFormat::Webp},  // lossless: VP8L
      {".bmp", {}, ImageFormat::Bmp},
      {".tif", {}, ImageFormat::Tiff},
  };
  for (const auto& c : cases) {
    INFO(c.ext << " " << (c.params.empty() ? 0 : c.params[1]));
    const auto bytes = encode(img, c.ext, c.params);
    const auto h = probe_image(bytes);
    CHECK(h.format == c.format);
    CHECK(h.width == 37);
    CHECK(h.height == 23);
    CHECK(h.orientation == 1);
  }
}

TEST_CASE("probe_image: refuses what is no image") {
  const std::vector<uint8_t> empty;
  CHECK_THROWS_AS(probe_image(empty), ParseError);
  const std::string text = "{\"label\": 3, \"this\": \"is json, not an image\"}";
  CHECK_THROWS_AS(probe_image({reinterpret_cast<const uint8_t*>(text.data()), text.size()}),
                  ParseError);
}

TEST_CASE("decode_image: a bare JPEG start marker is a parse error") {
  const std::vector<uint8_t> soi_only = {0xFF, 0xD8, 0xFF};
  CHECK_THROWS_AS(decode_image(soi_only, kMaxPixels), ParseError);
  CHECK_THROWS_AS(decode_dense(soi_only, kMaxPixels), ParseError);
  const std::vector<uint8_t> soi_eoi = {0xFF, 0xD8, 0xFF, 0xD9};
  CHECK_THROWS_AS(decode_image(soi_eoi, kMaxPixels), ParseError);
}

TEST_CASE("decode_image: pixels come out in BGR order") {
  const cv::Mat red(5, 7, CV_8UC3, cv::Scalar(0, 0, 255));  // BGR red
  const cv::Mat img = decode_image(encode(red, ".png"), kMaxPixels);
  REQUIRE(img.type() == CV_8UC3);
  REQUIRE(img.cols == 7);
  REQUIRE(img.rows == 5);
  CHECK(img.at<cv::Vec3b>(0, 0) == cv::Vec3b(0, 0, 255));
  CHECK(img.at<cv::Vec3b>(4, 6) == cv::Vec3b(0, 0, 255));

  // Through libjpeg-turbo too.
  const cv::Mat blue(16, 16, CV_8UC3, cv::Scalar(255, 0, 0));
  const cv::Mat j = decode_image(encode(blue, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95}), kMaxPixels);
  const cv::Vec3b p = j.at<cv::Vec3b>(8, 8);
  CHECK(p[0] > 240);
  CHECK(p[1] < 15);
  CHECK(p[2] < 15);
}

TEST_CASE("decode_image: lossless formats decode exactly") {
  const cv::Mat img = noise_image(31, 17);
  for (const char* ext : {".png", ".bmp"}) {
    const cv::Mat back = decode_image(encode(img, ext), kMaxPixels);
    INFO(ext);
    CHECK(cv::norm(back, img, cv::NORM_INF) == 0);
  }
  const cv::Mat webp =
      decode_image(encode(img, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101}), kMaxPixels);
  CHECK(cv::norm(webp, img, cv::NORM_INF) == 0);
}

TEST_CASE("decode_image: truncated JPEG and PNG are parse errors") {
  const cv::Mat img = noise_image(64, 64);
  auto jpeg = encode(img, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90});
  jpeg.resize(jpeg.size() / 2);
  CHECK_THROWS_AS(decode_image(jpeg, kMaxPixels), ParseError);

  auto png = encode(img, ".png");
  png.resize(png.size() / 2);
  CHECK_THROWS_AS(decode_image(png, kMaxPixels), ParseError);
  CHECK_THROWS_AS(decode_dense(png, kMaxPixels), ParseError);

  // Only the IEND chunk missing.
  auto png_no_end = encode(img, ".png");
  png_no_end.resize(png_no_end.size() - 12);
  CHECK_THROWS_AS(decode_image(png_no_end, kMaxPixels), ParseError);
}

TEST_CASE("decode_image: a JPEG claiming 60000x60000 is refused from its header") {
  auto jpeg = encode(noise_image(16, 16), ".jpg");
  // Patch the baseline frame header (FFC0: length, precision, height, width).
  size_t sof = 0;
  for (size_t i = 2; i + 9 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      sof = i;
      break;
    }
  REQUIRE(sof != 0);
  const uint16_t big = 60000;
  jpeg[sof + 5] = big >> 8;
  jpeg[sof + 6] = big & 0xFF;
  jpeg[sof + 7] = big >> 8;
  jpeg[sof + 8] = big & 0xFF;
  const auto h = probe_image(jpeg);
  CHECK(h.width == 60000);
  CHECK(h.height == 60000);

  const auto t0 = std::chrono::steady_clock::now();
  try {
    decode_image(jpeg, kMaxPixels);
    FAIL("expected ParseError");
  } catch (const ParseError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("60000x60000"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("--max-pixels"));
  }
  CHECK_THROWS_AS(decode_dense(jpeg, kMaxPixels), ParseError);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  CHECK(ms < 200);
}

TEST_CASE("decode_image: the pixel limit applies to PNG as well") {
  const auto png = encode(noise_image(100, 50), ".png");
  CHECK_NOTHROW(decode_image(png, 5000));
  CHECK_THROWS_AS(decode_image(png, 4999), ParseError);
}

TEST_CASE("decode_image: the pixel limit applies to TIFF, read from its first IFD") {
  const auto tif = encode(noise_image(100, 50), ".tif");
  CHECK_NOTHROW(decode_image(tif, 5000));
  CHECK_THROWS_AS(decode_image(tif, 4999), ParseError);
  CHECK_THROWS_AS(decode_dense(tif, 4999), ParseError);

  // A little-endian TIFF whose IFD claims 60000x60000 (LONG tags) and holds nothing else: it
  // must be refused from the header, never handed to libtiff.
  std::vector<uint8_t> big = {'I', 'I', 42, 0, 8, 0, 0, 0, 2, 0};
  for (uint16_t tag : {256, 257}) {
    const uint8_t entry[12] = {uint8_t(tag & 0xFF),
                               uint8_t(tag >> 8),
                               4,
                               0,
                               1,
                               0,
                               0,
                               0,
                               0x60,
                               0xEA,
                               0,
                               0};  // 60000 = 0xEA60
    big.insert(big.end(), entry, entry + 12);
  }
  big.insert(big.end(), {0, 0, 0, 0});
  const auto h = probe_image(big);
  CHECK(h.width == 60000);
  CHECK(h.height == 60000);
  try {
    decode_image(big, kMaxPixels);
    FAIL("expected ParseError");
  } catch (const ParseError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("60000x60000"));
  }

  // The first IFD pointing past the end, or no size tags: refused as corrupt.
  std::vector<uint8_t> bad_ifd = {'M', 'M', 0, 42, 0, 0, 0x10, 0};
  CHECK_THROWS_AS(probe_image(bad_ifd), ParseError);
  std::vector<uint8_t> no_size = {'I', 'I', 42, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK_THROWS_AS(probe_image(no_size), ParseError);
}

TEST_CASE("decode_image: a RIFF/WEBP container libwebp refuses is a parse error") {
  // Found by fuzz_image_decode: a WebP header libwebp rejects, with "DICM" at offset 128. Given
  // to cv::imdecode it reached OpenCV's DICOM decoder, whose GDCM asserts (abort).
  const uint8_t head[] = {'R', 'I', 'F', 'F', 0xb6, 0,   0,   0,
                          'W', 'E', 'B', 'P', 'V',  'P', '=', 'L'};
  std::vector<uint8_t> bytes(head, head + sizeof head);
  bytes.resize(128, 0x2f);
  bytes.insert(bytes.end(), {'D', 'I', 'C', 'M', 2, 0});
  bytes.resize(190, 0);
  try {
    probe_image(bytes);
    FAIL("expected ParseError");
  } catch (const ParseError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("corrupt WebP header"));
  }
  CHECK_THROWS_AS(decode_image(bytes, kMaxPixels), ParseError);
  CHECK_THROWS_AS(decode_dense(bytes, kMaxPixels), ParseError);
}

TEST_CASE("decode_image: WebP through libwebp matches OpenCV's decoder; a dense map keeps alpha") {
  // Its own generator (the shared cv::theRNG() gave other pixels whenever a test case was added
  // before this one), and no fully transparent pixel: lossless WebP may rewrite the colour of
  // those, which then differs from the source although the image is equal as RGBA.
  cv::Mat bgra(19, 27, CV_8UC4);
  cv::RNG rng(0x3eb9);
  rng.fill(bgra, cv::RNG::UNIFORM, cv::Scalar(0, 0, 0, 1), cv::Scalar::all(256));
  const auto webp = encode(bgra, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101});  // lossless
  const auto h = probe_image(webp);
  CHECK(h.alpha);
  const cv::Mat dense = decode_dense(webp, kMaxPixels);
  REQUIRE(dense.type() == CV_8UC4);
  CHECK(cv::norm(dense, bgra, cv::NORM_INF) == 0);
  const cv::Mat colour = decode_image(webp, kMaxPixels);
  REQUIRE(colour.type() == CV_8UC3);
  cv::Mat bgr;
  cv::cvtColor(bgra, bgr, cv::COLOR_BGRA2BGR);
  CHECK(cv::norm(colour, bgr, cv::NORM_INF) == 0);

  // Lossy: the same pixels as OpenCV's own WebP decoder gives.
  const auto lossy = encode(noise_image(40, 30), ".webp", {cv::IMWRITE_WEBP_QUALITY, 75});
  const cv::Mat ours = decode_image(lossy, kMaxPixels);
  const cv::Mat theirs = cv::imdecode(lossy, cv::IMREAD_COLOR);
  CHECK(cv::norm(ours, theirs, cv::NORM_INF) == 0);

  auto truncated = lossy;
  truncated.resize(truncated.size() / 2);
  CHECK_THROWS_AS(decode_image(truncated, kMaxPixels), ParseError);
}

TEST_CASE("decode_image: EXIF orientation 6 turns the picture 90 degrees clockwise") {
  const auto plain = encode(marked_image(48, 24), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  const cv::Mat before = decode_image(plain, kMaxPixels);
  REQUIRE(before.cols == 48);
  REQUIRE(before.rows == 24);
  CHECK(is_red(before.at<cv::Vec3b>(4, 4)));

  for (bool le : {true, false}) {
    INFO((le ? "II" : "MM"));
    const auto jpeg = with_exif(plain, 6, le);
    const auto h = probe_image(jpeg);
    CHECK(h.orientation == 6);
    CHECK(h.width == 48);  // as stored
    CHECK(h.height == 24);
    const cv::Mat img = decode_image(jpeg, kMaxPixels);
    REQUIRE(img.cols == 24);
    REQUIRE(img.rows == 48);
    // Clockwise: stored (x, y) goes to (H - 1 - y, x); the top-left block ends top-right.
    CHECK(is_red(img.at<cv::Vec3b>(4, 24 - 1 - 4)));
    CHECK(is_black(img.at<cv::Vec3b>(4, 4)));
    CHECK(is_black(img.at<cv::Vec3b>(43, 19)));
  }
}

TEST_CASE("decode_image: EXIF orientations 3 and 8") {
  const auto plain = encode(marked_image(48, 24), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  const cv::Mat r180 = decode_image(with_exif(plain, 3, false), kMaxPixels);
  REQUIRE(r180.cols == 48);
  REQUIRE(r180.rows == 24);
  CHECK(is_red(r180.at<cv::Vec3b>(24 - 1 - 4, 48 - 1 - 4)));  // bottom right
  CHECK(is_black(r180.at<cv::Vec3b>(4, 4)));

  const cv::Mat ccw = decode_image(with_exif(plain, 8, true), kMaxPixels);
  REQUIRE(ccw.cols == 24);
  REQUIRE(ccw.rows == 48);
  // Counter-clockwise: stored (x, y) goes to (y, W - 1 - x); the block ends bottom-left.
  CHECK(is_red(ccw.at<cv::Vec3b>(48 - 1 - 4, 4)));
  CHECK(is_black(ccw.at<cv::Vec3b>(4, 4)));

  // An out-of-range value is ignored.
  const cv::Mat bad = decode_image(with_exif(plain, 9, true), kMaxPixels);
  CHECK(bad.cols == 48);
  CHECK(probe_image(with_exif(plain, 9, true)).orientation == 1);
}

TEST_CASE("decode_image: grey and RGBA PNGs become 3-channel BGR") {
  cv::Mat grey(9, 11, CV_8UC1);
  for (int y = 0; y < 9; ++y)
    for (int x = 0; x < 11; ++x) grey.at<uint8_t>(y, x) = static_cast<uint8_t>(20 * y + x);
  const cv::Mat g = decode_image(encode(grey, ".png"), kMaxPixels);
  REQUIRE(g.type() == CV_8UC3);
  for (int y = 0; y < 9; ++y)
    for (int x = 0; x < 11; ++x) {
      const uint8_t v = grey.at<uint8_t>(y, x);
      CHECK(g.at<cv::Vec3b>(y, x) == cv::Vec3b(v, v, v));
    }

  cv::Mat bgra(6, 5, CV_8UC4, cv::Scalar(10, 20, 30, 255));
  bgra.at<cv::Vec4b>(2, 3) = cv::Vec4b(200, 100, 50, 255);
  const cv::Mat c = decode_image(encode(bgra, ".png"), kMaxPixels);
  REQUIRE(c.type() == CV_8UC3);
  CHECK(c.at<cv::Vec3b>(0, 0) == cv::Vec3b(10, 20, 30));
  CHECK(c.at<cv::Vec3b>(2, 3) == cv::Vec3b(200, 100, 50));
}

TEST_CASE("decode_dense: 16-bit PNG keeps its values") {
  cv::Mat depth(13, 17, CV_16UC1);
  for (int y = 0; y < 13; ++y)
    for (int x = 0; x < 17; ++x)
      depth.at<uint16_t>(y, x) = static_cast<uint16_t>(65535 - 3001 * x - 7 * y);
  const cv::Mat d = decode_dense(encode(depth, ".png"), kMaxPixels);
  REQUIRE(d.type() == CV_16UC1);
  CHECK(cv::norm(d, depth, cv::NORM_INF) == 0);

  cv::Mat mask(4, 4, CV_8UC1, cv::Scalar(3));
  const cv::Mat m = decode_dense(encode(mask, ".png"), kMaxPixels);
  CHECK(m.type() == CV_8UC1);
  CHECK(cv::norm(m, mask, cv::NORM_INF) == 0);
}

TEST_CASE("encode_image: round trips") {
  const cv::Mat img = noise_image(40, 24);
  SECTION("png is lossless") {
    const auto bytes = tarmac::encode_image(img, OutputFormat::Png, 0);
    CHECK(probe_image(bytes).format == ImageFormat::Png);
    CHECK(cv::norm(decode_image(bytes, kMaxPixels), img, cv::NORM_INF) == 0);
  }
  SECTION("png keeps 16-bit dense maps") {
    cv::Mat depth(3, 4, CV_16UC1, cv::Scalar(40000));
    const auto bytes = tarmac::encode_image(depth, OutputFormat::Png, 0);
    CHECK(cv::norm(decode_dense(bytes, kMaxPixels), depth, cv::NORM_INF) == 0);
  }
  SECTION("jpg is close") {
    cv::Mat smooth(24, 40, CV_8UC3);
    for (int y = 0; y < 24; ++y)
      for (int x = 0; x < 40; ++x)
        smooth.at<cv::Vec3b>(y, x) =
            cv::Vec3b(static_cast<uint8_t>(5 * x), static_cast<uint8_t>(8 * y), 128);
    const auto bytes = tarmac::encode_image(smooth, OutputFormat::Jpeg, 95);
    const auto h = probe_image(bytes);
    CHECK(h.format == ImageFormat::Jpeg);
    CHECK(h.width == 40);
    CHECK(h.height == 24);
    const cv::Mat back = decode_image(bytes, kMaxPixels);
    CHECK(cv::norm(back, smooth, cv::NORM_L1) / smooth.total() / 3 < 4.0);
  }
  SECTION("webp is close") {
    const cv::Mat flat(24, 40, CV_8UC3, cv::Scalar(30, 140, 220));
    const auto bytes = tarmac::encode_image(flat, OutputFormat::Webp, 90);
    CHECK(probe_image(bytes).format == ImageFormat::Webp);
    const cv::Mat back = decode_image(bytes, kMaxPixels);
    REQUIRE(back.size() == flat.size());
    CHECK(cv::norm(back, flat, cv::NORM_INF) <= 6);
  }
  SECTION("raw is RGB bytes, row by row") {
    cv::Mat small(2, 3, CV_8UC3);
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x)
        small.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uint8_t>(10 * x), static_cast<uint8_t>(y),
                                              static_cast<uint8_t>(100 + x + 10 * y));
    const auto bytes = tarmac::encode_image(small, OutputFormat::Raw, 0);
    std::vector<uint8_t> want;
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x) {
        const auto p = small.at<cv::Vec3b>(y, x);
        want.insert(want.end(), {p[2], p[1], p[0]});
      }
    CHECK(bytes == want);
  }
  SECTION("raw of a view (not continuous) is still the view's pixels") {
    const cv::Mat view = img(cv::Rect(5, 3, 4, 2));
    const auto bytes = tarmac::encode_image(view, OutputFormat::Raw, 0);
    REQUIRE(bytes.size() == 4 * 2 * 3);
    CHECK(bytes[0] == view.at<cv::Vec3b>(0, 0)[2]);
    CHECK(bytes[23] == view.at<cv::Vec3b>(1, 3)[0]);
  }
  SECTION("keep has nothing to encode") {
    CHECK_THROWS_AS(tarmac::encode_image(img, OutputFormat::Keep, 0), tarmac::InternalError);
  }
}

TEST_CASE("format extensions") {
  CHECK(tarmac::format_extension(OutputFormat::Jpeg) == "jpg");
  CHECK(tarmac::format_extension(OutputFormat::Png) == "png");
  CHECK(tarmac::format_extension(OutputFormat::Webp) == "webp");
  CHECK(tarmac::format_extension(OutputFormat::Raw) == "rgb");
  CHECK(tarmac::image_format_extension(ImageFormat::Jpeg) == "jpg");
  CHECK(tarmac::image_format_extension(ImageFormat::Bmp) == "bmp");
  CHECK(tarmac::image_format_extension(ImageFormat::Unknown) == "bin");
}
