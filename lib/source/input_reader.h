#pragma once
// Reads the members of every input in order, streaming: archives of any format and
// compression libarchive knows (tar, pax, gnu, ustar, zip; gz, zst, xz, bz2), directories,
// "-" for standard input, s3:// and http(s):// objects (streamed by remote/http.h, resumed by
// range after a dropped connection), and pipe:COMMAND, the output of a command (pipe_stream.h),
// read as standard input is. Nothing is extracted to disk. A zip file or remote zip object (its
// members stored or deflated) is read by zip_directory.h instead (preads, or Range GETs of the
// object's end): its members are handed on as stored, for the workers to inflate and check
// (packed_member.h).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/stop.h"
#include "remote/remote_config.h"
#include "source/member.h"
#include "source/pipe_stream.h"
#include "source/zip_directory.h"

namespace tarmac {

/// What is known about one input after (or while) reading it.
struct InputInfo {
  std::string path;   ///< as given; "-" for standard input; s3://, http(s)://, pipe:COMMAND
  uint64_t size = 0;  ///< bytes on disk (or of the remote object); 0 when unknown (stdin, pipes)
  uint64_t bytes_read = 0;
  uint32_t crc32 = 0;  ///< zlib CRC-32 of every byte read from the input
  uint64_t members = 0;
  std::string error;  ///< set when the input could not be read to its end (under skip)
  /// The compression it was read through: "gzip", libarchive's filter name ("xz", "bzip2",
  /// "zstd", ...), or "" (none).
  std::string compression;
  /// A remote object: failed requests retried, and the bytes their Range requests did not fetch
  /// again (the offsets they resumed from).
  uint32_t retries = 0;
  uint64_t resumed_bytes = 0;
};

/// A member that is not handed on as data, and why.
struct MemberNotice {
  uint32_t input = 0;
  std::string member;
  std::string reason;
  bool is_error = false;  ///< true: bad input (unsafe name, too large); false: ignored by design
  ErrorCode code = ErrorCode::None;
};

/// Where the reader stood when it released a sample: in input `input`, `bytes` read from it
/// with CRC-32 `crc32` (at_end: the input was read to its end; its bytes and crc32 are final).
/// What a checkpoint records, so that a resume can tell an input rewritten in place.
struct ReadMark {
  uint32_t input = 0;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  bool at_end = false;
};

/// What a resume expects to read again: every input before mark.input as it read to its end
/// (`done`: bytes and CRC-32 of each), and mark.input as it read up to the mark.
struct ReadExpectation {
  std::vector<std::pair<uint64_t, uint32_t>> done;
  ReadMark mark;
};

/// An input whose bytes differ from those a checkpoint recorded (resume), though its size and
/// modification time are the same: the converted samples may hold its old data.
class InputChanged : public FatalError {
 public:
  using FatalError::FatalError;
};

struct InputReaderOptions {
  uint64_t max_member_size = 1ull << 30;
  bool skip_errors = false;  ///< keep going after a truncated or corrupt archive
  /// Directories not walked into when a directory input holds them (the output directory).
  std::vector<std::string> exclude;
  /// Says whether a folder of a directory input holds a dataset tarmac wrote (the reader knows
  /// no dataset format): such a folder is not walked into, and is listed as one ignored member
  /// "FOLDER/" (ErrorCode::TarmacDataset) with the reason returned. Empty: not one. Unset: every
  /// folder is read.
  std::function<std::string(const std::filesystem::path& dir)> dataset_in_folder;
  /// Endpoint, credentials and retries for s3:// and http(s):// inputs (null: from the
  /// environment, as the AWS CLI reads it).
  std::shared_ptr<const remote::RemoteConfig> remote;
  /// Polled while a remote read or a pipe: command waits (network, backoff, a command's output);
  /// the read then fails (a command's process group killed).
  const StopRequest* stop = nullptr;
  /// Shared by the readers of one run that reads its inputs twice: each pipe: input read to
  /// its end is checked against its first read (PipeOutputChanged, whatever skip_errors says).
  std::shared_ptr<PipeRuns> pipe_runs;
};

struct InputCallbacks {
  std::function<void(uint32_t input, Member&& m)> on_member;
  std::function<void(MemberNotice&& n)> on_notice;
  std::function<void(uint32_t input)> on_input_end;
};

struct FdSource;

class InputReader {
 public:
  InputReader(const std::vector<std::string>& paths, InputReaderOptions options);

  /// Reads every input in order. Throws FatalError for an unreadable input (unless
  /// skip_errors, which records the error in the input's InputInfo and goes on).
  void run(const InputCallbacks& cb);

  /// Like run(), but hands on members with their name only: their data is skipped (seeked
  /// over where the input allows, else decompressed and discarded), and CRCs are not final.
  void run_names_only(const InputCallbacks& cb);

  /// Resuming: run() reads the inputs as `e` says they were read before, and throws InputChanged
  /// at the first difference, whatever skip_errors says. Call before run().
  void expect(ReadExpectation e);
  /// True once run() has read again, unchanged, everything expect() named (or nothing was
  /// expected). For the thread calling run().
  bool verified() const { return !expected_; }
  /// Where the reader stands now (for the thread calling run(), between reads).
  ReadMark mark() const;
  /// Throws InputChanged for input `index`, which reads otherwise than expected.
  [[noreturn]] void refuse_changed(uint32_t index) const;

  /// Inputs, with sizes known up front; bytes_read and crc32 are final after run().
  const std::vector<InputInfo>& inputs() const { return inputs_; }
  /// Sum of input sizes known before reading (0 when some size is unknown).
  uint64_t total_size() const;
  /// Bytes read so far, over all inputs; safe to read from another thread.
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }

 private:
  void read_archive(uint32_t index, const InputCallbacks& cb);
  void read_directory(uint32_t index, const InputCallbacks& cb);
  bool excluded(const std::filesystem::path& dir) const;
  void read_entries(uint32_t index, const InputCallbacks& cb, FdSource& src,
                    const std::string& where);
  bool read_zip(uint32_t index, const InputCallbacks& cb, FdSource& src, const std::string& where,
                const ReadAt& read_at, uint64_t size, size_t buffered);
  bool read_remote_zip(uint32_t index, const InputCallbacks& cb, FdSource& src,
                       const std::string& where);
  bool admit(uint32_t index, const InputCallbacks& cb, const std::string& name, uint64_t size,
             bool size_known);

  void check_input_end(uint32_t index);

  std::vector<InputInfo> inputs_;
  InputReaderOptions options_;
  std::optional<ReadExpectation> expected_;
  uint32_t current_ = 0;
  bool at_end_ = false;
  std::atomic<uint64_t> bytes_read_{0};
  bool names_only_ = false;
};

}  // namespace tarmac
