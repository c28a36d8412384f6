#pragma once
// What the source stage hands on: members of archives, grouped into samples.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tarmac {

/// How a member's bytes are held. A seekable zip's members come as the zip stores them, so
/// that the workers, not the reader thread, inflate and check them (packed_member.h).
enum class Packing : uint8_t {
  Plain,        ///< `data` is the member's bytes
  ZipStored,    ///< `data` is the member's bytes, still to be checked against `crc32`
  ZipDeflated,  ///< `data` is a raw deflate stream of `size` bytes whose CRC-32 is `crc32`
  ZipRefused,   ///< no data: the member cannot be read (`refused` says why)
};

/// One regular-file member of an input, read whole into memory.
struct Member {
  Member() = default;
  Member(std::string n, std::vector<uint8_t> d) : name(std::move(n)), data(std::move(d)) {}

  std::string name;  ///< path inside the archive, normalised (no leading "./")
  std::vector<uint8_t> data;
  Packing packing = Packing::Plain;
  uint32_t crc32 = 0;   ///< zip: the CRC-32 its central directory declares
  uint64_t size = 0;    ///< zip: the size its central directory declares
  std::string refused;  ///< ZipRefused: why, in a sentence that names no member
};

/// A sample or member left out as a duplicate under --on-duplicate first|last.
struct DuplicateNote {
  std::string member;       ///< the member left out; empty when the whole sample is
  uint32_t kept_input = 0;  ///< index into all the run's inputs of the one kept
  std::string reason;       ///< names the key and both inputs
};

/// Members that share a key (WebDataset convention: `dir/0001.jpg` + `dir/0001.json`).
struct RawSample {
  std::string key;
  uint32_t input = 0;  ///< index into the run's inputs
  std::vector<Member> members;
  std::vector<std::string> errors;  ///< member-level problems; non-empty = the sample is bad
  bool dropped = false;  ///< a duplicate left out whole (no members; its note is in duplicates)
  std::vector<DuplicateNote> duplicates;   ///< what was left out of this key as a duplicate
  ErrorCode error_code = ErrorCode::None;  ///< the code of errors.front()
  int64_t table_group = -1;  ///< convert --table: the group of rows it is (-1: not a table's)
  /// The members' bytes as held (a zip member's compressed size): what the group window counts.
  uint64_t bytes() const {
    uint64_t n = 0;
    for (const auto& m : members) n += m.data.size();
    return n;
  }
};

/// Where a member's key ends (--key-rule): at the first dot of its file name (WebDataset's
/// rule: `0001.rgb.png` -> `0001` + `rgb.png`) or at the last (photo folders:
/// `IMG_2020.01.01.jpg` -> `IMG_2020.01.01` + `jpg`).
enum class KeyRule { FirstDot, LastDot };

/// "first-dot" or "last-dot".
const char* key_rule_name(KeyRule r);

/// Splits a member name into key and extension: the key is the path up to the first (or, under
/// KeyRule::LastDot, the last) dot of the file name, the extension the rest, lower-cased. False
/// when the file name has no key or no extension (hidden files, names without a dot).
bool split_member_name(const std::string& name, std::string& key, std::string& ext,
                       KeyRule rule = KeyRule::FirstDot);

/// True when a member of extension `ext` is an image by `image_exts` (--image): `ext` is one of
/// them, or ends with "." + one of them ("rgb.png" for "png": its last extension).
bool is_image_extension(const std::string& ext, const std::vector<std::string>& image_exts);

/// True for names that are never sample members: hidden files (".name") and "__MACOSX/".
bool is_hidden_or_metadata(const std::string& name);

/// Why a member name is unsafe to use as a key (absolute, "..", empty component), or "".
std::string unsafe_name_reason(const std::string& name);

}  // namespace tarmac
