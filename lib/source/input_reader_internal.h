#pragma once
// What the readers of each kind of input share (InputReader's parts: input_reader.cpp, and one
// file per kind: archive_input.cpp for libarchive's formats and compressions, zip_input.cpp,
// folder_input.cpp): the byte source an input is read through, checksummed on the way, and the
// rules for member names. Internal to lib/source.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/http.h"
#include "source/gzip_inflater.h"
#include "source/input_reader.h"
#include "source/pipe_stream.h"

namespace tarmac {

constexpr size_t kReadBlock = 1 << 20;
constexpr uint64_t kNoCheck = UINT64_MAX;

// Feeds libarchive from a file descriptor, checksumming every byte on the way. A gzip stream
// is decompressed here with ISA-L (gzip_inflater.h) rather than by libarchive's zlib filter.
struct FdSource {
  int fd = -1;
  bool owned = false;
  std::unique_ptr<remote::HttpStream> stream;  // a remote input: read from it, not from fd
  std::unique_ptr<PipeStream> pipe;            // a pipe: input: read from it, not from fd
  bool remote_failed = false;  // read_error is the (remote or pipe) stream's one-line error
  std::string stream_error;    // the stream failed after filling part of a block: said next
  InputInfo* info = nullptr;
  std::atomic<uint64_t>* total = nullptr;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kReadBlock);
  std::string read_error;
  bool seeked = false;   // libarchive jumped (zip central directory, skipped data)
  bool sniffed = false;  // the first bytes were looked at for gzip
  // A remote input's first bytes, already read into `buffer` to tell a zip (peek_remote): what
  // read_raw returned for them, handed to libarchive first.
  std::optional<ssize_t> peeked;
  uint32_t range_retries = 0;  // of the Range GETs that read a remote zip's central directory
  std::unique_ptr<GzipInflater> gzip;
  std::vector<uint8_t> inflated;  // gzip: what libarchive is handed
  bool raw_end = false;           // gzip: the input is read to its end
  // Resuming: the CRC-32 the input's first check_at bytes must have (kNoCheck: none); checked
  // as soon as they are read (then `expected`, the reader's, is met: reset), or `changed` (the
  // read then fails).
  uint64_t check_at = kNoCheck;
  uint32_t check_crc = 0;
  std::optional<ReadExpectation>* expected = nullptr;
  bool changed = false;
  // The input's last bytes as read (at most a zip's end record and comment): a zip read as a
  // stream must end with its end-of-central-directory record.
  std::vector<uint8_t> tail;
  bool seekable = false;  // libarchive was given seek_cb (its zip reader reads the directory)
};

namespace detail {

/// The next bytes of the input into src->buffer from `at`, checksummed and counted; -1 on error
/// (src->read_error says why).
ssize_t read_raw(FdSource* src, size_t at = 0);

/// True when `tail`, the last bytes of a zip, ends with its end-of-central-directory record (a
/// cut anywhere before that, in a member or in the directory, leaves it out).
bool ends_with_zip_end(const std::vector<uint8_t>& tail);

/// A member name with its "." segments and repeated slashes taken out ("./d/./x.jpg" and
/// "d//x.jpg" are "d/x.jpg"), so that names extracting to one path are one key. A leading '/'
/// and ".." segments are kept, for admit() to refuse.
std::string normalise(const std::string& name);

/// A name that is not UTF-8 (in a tar, a zip or a folder) leaves its member out; the notice
/// holds it escaped, so the manifest (JSON) and the terminal can show it.
MemberNotice bad_name_notice(uint32_t input, std::string_view name);

}  // namespace detail
}  // namespace tarmac
