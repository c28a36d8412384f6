#include "transform/opencv_codecs.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "common/error.h"

namespace fs = std::filesystem;
using namespace tarmac;

namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  const char* name;
  explicit ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
};

}  // namespace

TEST_CASE(
    "the codecs plugin is looked for next to the executable, in its installed place, "
    "then (from the build tree only) where the build put it") {
  unsetenv("TARMAC_OPENCV_CODECS");
  const auto c = opencv_codecs_candidates();
  const fs::path exe_dir = fs::canonical("/proc/self/exe").parent_path();
  REQUIRE(c.size() == 3);
  CHECK(c[0] == (exe_dir / "libtarmac_opencv_codecs.so").string());
  // bin/ -> lib/tarmac/ (or lib/<multiarch>/tarmac/), as cmake --install lays them out
  CHECK(c[1] == (exe_dir / TARMAC_PLUGIN_DIR_FROM_BIN / "libtarmac_opencv_codecs.so")
                    .lexically_normal()
                    .string());
  CHECK(fs::path(c[1]).parent_path().filename() == "tarmac");
  CHECK(c[2] == TARMAC_OPENCV_CODECS_BUILD_PATH);
  CHECK(fs::exists(c[2]));
}

TEST_CASE("TARMAC_OPENCV_CODECS names the only plugin tried") {
  const ScopedEnv env("TARMAC_OPENCV_CODECS", "/nowhere/libx.so");
  CHECK(opencv_codecs_candidates() == std::vector<std::string>{"/nowhere/libx.so"});
}

TEST_CASE("the plugin decodes and encodes like OpenCV's imgcodecs in this process") {
  cv::Mat img(17, 23, CV_16UC1);
  cv::randu(img, 0, 65535);
  std::vector<uint8_t> png;
  REQUIRE(cv::imencode(".png", img, png));
  const cv::Mat back = opencv_decode(png, detail::CvDecodeMode::Unchanged, "dense map");
  REQUIRE(back.type() == CV_16UC1);
  CHECK(cv::norm(back, img, cv::NORM_INF) == 0);

  const std::vector<uint8_t> ours = opencv_encode(img, detail::CvEncodeFormat::Png, 1);
  const cv::Mat theirs = cv::imdecode(ours, cv::IMREAD_UNCHANGED);
  REQUIRE(theirs.type() == CV_16UC1);
  CHECK(cv::norm(theirs, img, cv::NORM_INF) == 0);

  const std::vector<uint8_t> junk = {0x89, 'P', 'N', 'G', 1, 2, 3};
  CHECK_THROWS_AS(opencv_decode(junk, detail::CvDecodeMode::Bgr8, "image"), ParseError);
}
