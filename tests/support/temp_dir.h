#pragma once
// A fresh, empty directory for one test: <tmp>/tarmac-SUITE-test-PID/NAME, emptied if a
// previous run of this process id left it. Shared by the unit tests that write datasets.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace tarmac::test {

inline std::filesystem::path temp_dir(std::string_view suite, const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() /
      ("tarmac-" + std::string(suite) + "-test-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace tarmac::test
