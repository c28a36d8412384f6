#pragma once
// Test fixture: small real datasets, checked in under tests/data/datasets/parts/ and written by
// tests/data/datasets/make_datasets.py from docs/format.md -- not by tarmac's writer, so that a
// writer bug and a reader (verify, merge) bug cannot cancel out. Each part holds what the
// library's convert() made of a generated tar archive: samples PREFIX/NNN, a PNG 16 x (12 +
// i % 5) and a JSON of {"cls": i, "score": i or i + 0.5, "pts": i % 3 + 1 points [1.5, 2],
// "name": "n<i>"}, converted with shard_size 4096 (see PARTS in make_datasets.py).
#include <filesystem>
#include <string>

namespace tarmac::testing {

/// Copies the checked-in part `name` to `dir`/`out` (replacing it; writable, to be damaged)
/// and returns that directory.
inline std::string copy_part(const std::filesystem::path& dir, const std::string& out,
                             const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dst = dir / out;
  fs::remove_all(dst);
  fs::create_directories(dir);
  fs::copy(fs::path(TARMAC_TEST_DATA) / "datasets" / "parts" / name, dst,
           fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(dst))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  return dst.string();
}

}  // namespace tarmac::testing
