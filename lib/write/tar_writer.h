#pragma once
// Writes plain uncompressed POSIX tar (ustar, with pax headers where ustar cannot
// hold a name or size) that GNU tar, bsdtar and Python's tarfile all read.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "write/file_util.h"

namespace tarmac {

/// One tar file being written. Life cycle: construct (creates/truncates the file),
/// add() members, finish(). Output bytes depend only on the calls made (mtime 0, uid/gid 0,
/// mode 0644, empty uname/gname). Destroying without finish() leaves a truncated archive.
class TarWriter {
 public:
  /// Creates or truncates `path`; throws FatalError.
  explicit TarWriter(std::string path);
  /// Goes on writing an unfinished archive whose first `size` bytes (CRC-32 `crc`) were
  /// written and synced before an interruption; anything after them is cut off.
  TarWriter(std::string path, uint64_t size, uint32_t crc);

  /// Appends a regular-file member and returns the file offset where its data begins.
  /// Throws FatalError on I/O failure, InternalError for an empty name, one
  /// containing a NUL byte or one ending with '/'.
  uint64_t add(std::string_view member_name, std::span<const uint8_t> data);

  /// Exact number of bytes add(name, <data_size bytes>) would write now: headers
  /// (pax ones included) plus data padded to 512.
  uint64_t bytes_if_added(std::string_view member_name, uint64_t data_size) const;

  /// Bytes written so far (without the end-of-archive blocks finish() adds).
  uint64_t size() const { return file_.position(); }

  /// Writes the two zero blocks ending the archive, fsyncs and closes, checking every step.
  /// Throws FatalError.
  void finish();

  /// fsyncs what was written so far (a checkpoint). Throws FatalError.
  void sync() { file_.sync(); }

  const std::string& path() const { return file_.path(); }

  /// zlib CRC-32 of every byte written so far (of the whole file after finish()); the
  /// manifest records it so that `tarmac verify` can check the shard end to end.
  uint32_t crc32() const { return crc_; }

 private:
  void write(std::span<const uint8_t> bytes);

  OutputFile file_;
  uint32_t crc_ = 0;
};

}  // namespace tarmac
