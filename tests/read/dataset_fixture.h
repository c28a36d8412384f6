#pragma once
// The reader tests' dataset: tests/data/datasets/read12, checked in, written by
// tests/data/datasets/make_datasets.py from docs/format.md (not by tarmac's writer, so that a
// writer bug and a reader bug cannot cancel out). Copied once per test process under a temp
// dir, with the same content as tests/read/make_fixture.py's archive converted by
// `tarmac convert --format png --dense depth.png --shard-size 8K`.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace tarmac::test {

inline constexpr int kSamples = 12, kWidth = 32, kHeight = 24;

/// The RGB pixel (x, y) of sample k, as make_fixture.py (and make_datasets.py) draws it.
inline uint8_t expected_pixel(int k, int x, int y, int c) {
  const int v[3] = {(x * 7 + k * 13) % 256, (y * 11 + k) % 256, (x + y + k * 5) % 256};
  return static_cast<uint8_t>(v[c]);
}

/// The fixture dataset's directory (12 samples, 4 shards, PNG images + a 16-bit depth map): a
/// copy of the checked-in one, removed with its temp root when the test process exits.
inline const std::string& fixture_dataset() {
  struct Fixture {
    std::filesystem::path root;
    std::string dir;
    Fixture() {
      root = std::filesystem::temp_directory_path() /
             ("tarmac-read-test-" + std::to_string(::getpid()));
      std::filesystem::remove_all(root);
      std::filesystem::create_directories(root);
      dir = (root / "ds").string();
      try {
        std::filesystem::copy(TARMAC_TEST_DATA "/datasets/read12", dir,
                              std::filesystem::copy_options::recursive);
        // Writable even from a read-only checkout: copy_fixture's copies are damaged in place.
        for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
          std::filesystem::permissions(e.path(), std::filesystem::perms::owner_write,
                                       std::filesystem::perm_options::add);
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

/// A fresh copy of the fixture dataset in `name` with the derived columns of
/// tests/data/datasets/read12_columns in its columns/ (emb: F32 [3] per sample, [k, 2k, -k];
/// lat: U16 [2, 1 + k % 3], 100k + j; old: bound to another annotation file).
inline std::string copy_fixture_with_columns(const std::string& name) {
  const std::string dir = copy_fixture(name);
  std::filesystem::copy(TARMAC_TEST_DATA "/datasets/read12_columns",
                        std::filesystem::path(dir) / "columns",
                        std::filesystem::copy_options::recursive);
  return dir;
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
