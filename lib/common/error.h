#pragma once
// One error vocabulary. Two grades of failure, kept apart in the type (as libarchive does with
// ARCHIVE_WARN/ARCHIVE_FATAL): a SampleError spoils one sample, and the run may go on without
// it under --on-error skip; a FatalError stops the run (a UsageError, before it starts: the
// options are wrong). What was left out or ignored carries an
// ErrorCode, a stable name users filter and count by in the manifest (`code`), next to the
// human reason. The reader's API errors map one to one to the C ABI's codes (ReadErrorCode).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tarmac {

/// Why a sample, member or input was left out, or a member ignored. The names are stable.
enum class ErrorCode : uint8_t {
  None,
  // A sample left out (--on-error skip) or that stopped the run.
  NoImage,            ///< no image member
  AmbiguousImage,     ///< several image members, and nothing says which is the image
  NoDenseMap,         ///< a --dense member is missing
  BadImage,           ///< the image does not decode (corrupt, truncated, too large, unsupported)
  BadDenseMap,        ///< a dense map does not decode or is of an unsupported kind
  BadJson,            ///< a .json label member does not parse
  BadNpy,             ///< a .npy label member does not parse
  BadNpz,             ///< a .npz label member does not parse
  BadText,            ///< a .txt/.cls label member does not parse
  BadField,           ///< a field named by an option (--points, --boxes, --crop field:) is unusable
  SchemaMismatch,     ///< the sample's fields contradict earlier samples'
  DuplicateKey,       ///< a key in two inputs (--on-duplicate)
  DuplicateMember,    ///< a member name twice in one sample (--on-duplicate)
  LateMember,         ///< a member came after its sample left the group window
  OutOfMemory,        ///< the sample did not fit in memory
  CorruptMember,      ///< a zip member does not inflate, or not to its declared size and CRC-32
  UnsupportedMember,  ///< a zip member is encrypted, or its sizes cannot be right
  BadSample,          ///< anything else wrong with the sample
  MissingMember,      ///< a table row names a member that is not in the inputs
  // A member left out, or an input not read to its end.
  BadMemberName,     ///< not valid UTF-8
  UnsafeMemberName,  ///< absolute, "..", or otherwise unsafe
  MemberTooLarge,    ///< over --max-member-size
  InputError,        ///< the input could not be read to its end
  // A member ignored by design.
  HiddenFile,        ///< .name, __MACOSX/
  NoExtension,       ///< no key without an extension
  Link,              ///< hard or symbolic link, not followed
  NotRegularFile,    ///< directory, device, fifo
  UnusedMember,      ///< neither an image, a dense map nor a label
  SecondImage,       ///< another image member of the sample was used
  UnusedImage,       ///< an image no table row names (convert --table)
  NoInstances,       ///< a sample whose --instances field has no entries: no output
  DuplicateContent,  ///< an image that duplicates a kept one by content (convert --dedup)
  TarmacDataset,     ///< a folder of a directory input that holds a tarmac dataset: not read
};
inline constexpr size_t kNumErrorCodes = static_cast<size_t>(ErrorCode::TarmacDataset) + 1;

/// The stable name: "no_image", "bad_json", "duplicate_key", ...
std::string_view error_code_name(ErrorCode c);

/// This sample cannot be converted; the message names archive, member and reason.
class SampleError : public std::runtime_error {
 public:
  explicit SampleError(const std::string& what, ErrorCode code = ErrorCode::BadSample)
      : std::runtime_error(what), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

/// The run cannot go on (unreadable archive, full disk, bad options...); for the reader: no
/// dataset, or a file that cannot be mapped.
class FatalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The options are wrong: a value out of range, or options that cannot go together. Thrown
/// before anything is read or written; the message names the option(s) and the fix. The CLI
/// exits 2 (usage) with it, as for a flag it could not parse.
class UsageError : public FatalError {
 public:
  using FatalError::FatalError;
};

/// A parser of untrusted bytes (labels, images, annotation file) refused its input.
/// The message says why; the caller adds where (archive, member).
class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The reader's errors, one to one with the C ABI's TARMAC_E_* codes (c_api.cpp checks it):
/// ArgumentError, IndexError, FatalError, ParseError, DataError (read/dataset.h), and anything
/// else (out of memory).
enum class ReadErrorCode : int {
  Invalid = 1,
  Range = 2,
  Io = 3,
  Parse = 4,
  Data = 5,
  Internal = 6
};

/// A caller's mistake at the reader's API: an unknown field or blob kind, a buffer of the
/// wrong size.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A sample index beyond the dataset.
class IndexError : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

}  // namespace tarmac
