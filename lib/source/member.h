#pragma once
// What the source stage hands on: members of archives, grouped into samples.
#include <cstdint>
#include <string>
#include <vector>

namespace tarmac {

/// One regular-file member of an input, read whole into memory.
struct Member {
  std::string name;  ///< path inside the archive, normalised (no leading "./")
  std::vector<uint8_t> data;
};

/// Members that share a key (WebDataset convention: `dir/0001.jpg` + `dir/0001.json`).
struct RawSample {
  std::string key;
  uint32_t input = 0;  ///< index into the run's inputs
  std::vector<Member> members;
  std::vector<std::string> errors;  ///< member-level problems; non-empty = the sample is bad
  uint64_t bytes() const {
    uint64_t n = 0;
    for (const auto& m : members) n += m.data.size();
    return n;
  }
};

/// Splits a member name into key and extension: the key is the path up to the first dot of
/// the file name, the extension the rest, lower-cased. False when the file name has no key
/// or no extension (hidden files, names without a dot).
bool split_member_name(const std::string& name, std::string& key, std::string& ext);

/// Why a member name is unsafe to use as a key (absolute, "..", empty component), or "".
std::string unsafe_name_reason(const std::string& name);

}  // namespace tarmac
