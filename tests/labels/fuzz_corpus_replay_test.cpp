#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "labels/json_labels.h"
#include "labels/npy.h"
#include "labels/npz.h"

// Replays the saved fuzz corpora so that every input that once crashed keeps being tried
// in the normal test run, without the fuzzer.
namespace {

std::vector<std::vector<uint8_t>> corpus(const std::string& target) {
  std::vector<std::vector<uint8_t>> out;
  const std::filesystem::path dir =
      std::filesystem::path(TARMAC_TEST_DATA) / ".." / "fuzz" / "corpus" / target;
  REQUIRE(std::filesystem::is_directory(dir));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(entry.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  REQUIRE_FALSE(out.empty());
  return out;
}

template <typename F>
void replay(const std::string& target, F parse) {
  for (const auto& input : corpus(target)) {
    try {
      parse(input);
    } catch (const tarmac::ParseError&) {
    }
  }
}

}  // namespace

TEST_CASE("fuzz corpus replay: npy") {
  replay("fuzz_labels_npy", [](const auto& b) { tarmac::parse_npy(b); });
}

TEST_CASE("fuzz corpus replay: npz") {
  replay("fuzz_labels_npz", [](const auto& b) { tarmac::parse_npz(b, "p.", 1 << 20); });
}

TEST_CASE("fuzz corpus replay: json") {
  replay("fuzz_labels_json", [](const auto& b) { tarmac::parse_json_labels(b, "p.", "json"); });
}
