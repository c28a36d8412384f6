#pragma once
// A real converted dataset for the reader tests: tests/read/make_fixture.py writes the
// archive, the tarmac binary converts it. Made once per test process under a temp dir.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace tarmac::test {

inline constexpr int kSamples = 12, kWidth = 32, kHeight = 24;

/// The RGB pixel (x, y) of sample k, as make_fixture.py draws it.
inline uint8_t expected_pixel(int k, int x, int y, int c) {
  const int v[3] = {(x * 7 + k * 13) % 256, (y * 11 + k) % 256, (x + y + k * 5) % 256};
  return static_cast<uint8_t>(v[c]);
}

inline void run(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("fixture command failed: " + cmd);
}

/// The fixture dataset's directory (12 samples, 4 shards, PNG images + a 16-bit depth map);
/// removed with its temp root when the test process exits.
inline const std::string& fixture_dataset() {
  struct Fixture {
    std::filesystem::path root;
    std::string dir;
    Fixture() {
      root = std::filesystem::temp_directory_path() /
             ("tarmac-read-test-" + std::to_string(::getpid()));
      std::filesystem::remove_all(root);
      std::filesystem::create_directories(root);
      try {
        const std::string in = (root / "in.tar").string();
        dir = (root / "ds").string();
        run("/usr/bin/python3 " TARMAC_READ_TEST_DIR "/make_fixture.py " + in);
        // $TARMAC overrides the converter (e.g. a non-sanitized one for a sanitizer run of the
        // reader).
        const char* bin = std::getenv("TARMAC");
        run(std::string(bin && *bin ? bin : TARMAC_BIN) + " convert -q " + in + " -o " + dir +
            " --format png --dense depth.png --shard-size 8K > /dev/null");
      } catch (...) {
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
        throw;
      }
    }
    ~Fixture() {
      std::error_code ec;
      std::filesystem::remove_all(root, ec);
    }
  };
  static const Fixture f;
  return f.dir;
}

/// A fresh copy of the fixture dataset in `name` under the temp root, to be damaged.
inline std::string copy_fixture(const std::string& name) {
  const std::filesystem::path src(fixture_dataset());
  const auto dst = src.parent_path() / name;
  std::filesystem::remove_all(dst);
  std::filesystem::copy(src, dst, std::filesystem::copy_options::recursive);
  return dst.string();
}

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

inline void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace tarmac::test
