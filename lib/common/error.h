#pragma once
// One error vocabulary. Every exception tarmac throws is a tarmac::Error: one root, one
// std::runtime_error base, so `catch (const tarmac::Error&)` catches all of them and nothing of
// the standard library's. Each carries a Grade, what the failure means for the run (as
// libarchive keeps ARCHIVE_WARN apart from ARCHIVE_FATAL): a SampleError spoils one sample, and
// the run may go on without it under --on-error skip; a FatalError stops the run (a UsageError,
// before it starts: the options are wrong); an Interrupted one was stopped by a signal; an
// InternalError is tarmac's own bug. The CLI maps the grade to its exit status in one place
// (apps/errors.h, error_exit_code). What was left out or ignored carries an ErrorCode, a
// stable name users filter and count by in the manifest (`code`), next to the human reason.
// The reader's API errors map one to one to the C ABI's codes (ReadErrorCode).
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

/// What a failure means for the run, and so for the CLI's exit status (docs/cli.md, "Exit
/// codes and errors").
enum class Grade : uint8_t {
  Sample,       ///< one sample is spoilt; --on-error skip goes on without it (exit 1 if it stops)
  Fatal,        ///< the run cannot go on: unreadable input, full disk, damaged data (exit 1)
  Usage,        ///< the options or arguments are wrong; nothing was read or written (exit 2)
  Internal,     ///< a broken invariant of tarmac's own: a bug to report (exit 1)
  Interrupted,  ///< stopped by a signal (exit 128 + the signal)
};

/// "sample", "fatal", "usage", "internal", "interrupted".
std::string_view grade_name(Grade g);

/// The root of every exception tarmac throws. The message names archive, member, row or field
/// and the reason; grade() says what it means for the run; code() why a sample was left out
/// (ErrorCode::None where none applies); signal() the signal of an Interrupted one, else 0.
class Error : public std::runtime_error {
 public:
  Error(const std::string& what, Grade grade, ErrorCode code = ErrorCode::None, int signal = 0)
      : std::runtime_error(what), grade_(grade), code_(code), signal_(signal) {}
  Grade grade() const { return grade_; }
  ErrorCode code() const { return code_; }
  int signal() const { return signal_; }

 private:
  Grade grade_;
  ErrorCode code_;
  int signal_;
};

/// The grade of any exception: an Error's own; Internal for std::logic_error (a broken
/// precondition of tarmac's code); Fatal for anything else (out of memory, the standard
/// library's I/O).
Grade grade_of(const std::exception& e);

/// This sample cannot be converted; the message names archive, member and reason.
class SampleError : public Error {
 public:
  explicit SampleError(const std::string& what, ErrorCode code = ErrorCode::BadSample)
      : Error(what, Grade::Sample, code) {}
};

/// The run cannot go on (unreadable archive, full disk, bad options...); for the reader: no
/// dataset, or a file that cannot be mapped.
class FatalError : public Error {
 public:
  explicit FatalError(const std::string& what) : Error(what, Grade::Fatal) {}

 protected:
  FatalError(const std::string& what, Grade grade, int signal = 0)
      : Error(what, grade, ErrorCode::None, signal) {}
};

/// The options are wrong: a value out of range, or options that cannot go together. Thrown
/// before anything is read or written; the message names the option(s) and the fix. The CLI
/// exits 2 (usage) with it, as for a flag it could not parse.
class UsageError : public FatalError {
 public:
  explicit UsageError(const std::string& what) : FatalError(what, Grade::Usage) {}
};

/// A broken invariant of tarmac's own code (never the input's fault): a bug to report.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error(what, Grade::Internal) {}
};

/// A parser of untrusted bytes (labels, images, annotation file) refused its input.
/// The message says why; the caller adds where (archive, member).
class ParseError : public Error {
 public:
  explicit ParseError(const std::string& what) : Error(what, Grade::Fatal) {}
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
/// wrong size. (Not a std::invalid_argument: catch it by this name, or as tarmac::Error.)
class ArgumentError : public Error {
 public:
  explicit ArgumentError(const std::string& what) : Error(what, Grade::Usage) {}
};

/// A sample index beyond the dataset. (Not a std::out_of_range: catch it by this name, or as
/// tarmac::Error.)
class IndexError : public Error {
 public:
  explicit IndexError(const std::string& what) : Error(what, Grade::Usage) {}
};

}  // namespace tarmac
