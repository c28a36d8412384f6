#include "transform/opencv_codecs.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/error.h"

namespace tarmac {
namespace {

constexpr const char* kPluginName = "libtarmac_opencv_codecs.so";

const detail::OpenCvCodecsV1* load_plugin() {
  std::string tried;
  for (const std::string& path : opencv_codecs_candidates()) {
    // RTLD_LOCAL: the ~140 libraries imgcodecs brings stay out of the global namespace.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why != nullptr ? why : "not loadable");
      continue;
    }
    using Entry = const detail::OpenCvCodecsV1* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "tarmac_opencv_codecs_v1"));
    if (entry == nullptr) {
      tried += "\n  " + path + ": no tarmac_opencv_codecs_v1 (not a tarmac plugin?)";
      continue;
    }
    return entry();
  }
  throw FatalError(std::string("cannot load ") + kPluginName +
                   ", which tarmac needs for PNG, BMP, TIFF and CMYK JPEG images (keep it next "
                   "to the tarmac binary or libtarmac_c.so, in lib/tarmac/ of an installed tree, "
                   "or set TARMAC_OPENCV_CODECS to its path); tried:" +
                   tried);
}

// A function-local static: loaded once, thread-safely; a failed load throws and the next
// call tries again.
const detail::OpenCvCodecsV1& plugin() {
  static const detail::OpenCvCodecsV1* table = load_plugin();
  return *table;
}

}  // namespace

std::vector<std::string> opencv_codecs_candidates() {
  if (const char* env = std::getenv("TARMAC_OPENCV_CODECS"); env != nullptr && *env != '\0')
    return {env};
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  auto add = [&out](const fs::path& path) {
    const std::string s = path.lexically_normal().string();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  // The object holding this code: libtarmac_c.so or libtarmac_reader.so when a library, else
  // the executable. For an executable dladdr gives argv[0], which may be relative to anywhere:
  // only an absolute name is trusted (no plugin is ever loaded from the working directory).
  fs::path self;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&opencv_codecs_candidates), &info) != 0 &&
      info.dli_fname != nullptr && info.dli_fname[0] == '/')
    self = fs::canonical(info.dli_fname, ec);
  const bool in_library = !self.empty() && self != exe;
  if (!in_library) self = exe;
  // Beside the object (a bundle, a copy), then where `cmake --install` puts it relative to a
  // library (LIBDIR/tarmac/) or to an executable (BINDIR/../LIBDIR/tarmac/), so that an
  // installed tree works wherever it is moved. A library never looks beside the program that
  // loaded it (python3's /usr/bin/../lib/tarmac/ may hold another installation's plugin).
  if (!self.empty()) {
    add(self.parent_path() / kPluginName);
    add(self.parent_path() /
        (in_library ? TARMAC_PLUGIN_DIR_FROM_LIB : TARMAC_PLUGIN_DIR_FROM_BIN) / kPluginName);
  }
#ifdef TARMAC_OPENCV_CODECS_BUILD_PATH
  // Where the build put it, only for code running from the build tree (tests, build/apps/
  // tarmac): an installed copy must never depend on a build folder that may go away.
  const fs::path build = fs::canonical(TARMAC_BUILD_DIR, ec);
  auto inside_build = [&build](const fs::path& p) {
    if (build.empty() || p.empty()) return false;
    const auto [b, _] = std::mismatch(build.begin(), build.end(), p.begin(), p.end());
    return b == build.end();
  };
  if (inside_build(self)) out.emplace_back(TARMAC_OPENCV_CODECS_BUILD_PATH);
#endif
  return out;
}

cv::Mat opencv_decode(std::span<const uint8_t> data, detail::CvDecodeMode mode, const char* what) {
  cv::Mat m;
  std::string error;
  if (!plugin().decode(data.data(), data.size(), mode, &m, &error))
    throw ParseError(std::string("corrupt or truncated ") + what + ": " + error);
  return m;
}

std::vector<uint8_t> opencv_encode(const cv::Mat& img, detail::CvEncodeFormat format, int param) {
  std::vector<uint8_t> out;
  std::string error;
  if (!plugin().encode(&img, format, param, &out, &error))
    throw FatalError("image encoding failed: " + error);
  return out;
}

}  // namespace tarmac
