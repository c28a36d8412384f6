#pragma once
// Small POSIX file helpers for the writers: an owned output fd whose every
// failure becomes a FatalError naming the file, and atomic replace-by-rename.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tarmac {

/// Throws FatalError "<action> '<path>': <reason>", the reason being io_error_reason(err)
/// (write actions name the byte count themselves).
[[noreturn]] void throw_io_error(std::string_view action, const std::string& path, int err);

/// throw_io_error for a write, fsync or close of `path`: an EIO while the file system holding
/// it is full (under 1 MiB free) says "no space left on device" too, as NFS, FUSE and some
/// file systems report a full disk when they write back.
[[noreturn]] void throw_write_error(std::string_view action, const std::string& path, int err);

/// What an I/O error says: "no space left on device" for ENOSPC, for EDQUOT (the user's quota)
/// and for EIO when `free_bytes` (what the file system has free, when known) is under 1 MiB;
/// else strerror(err).
std::string io_error_reason(int err, std::optional<uint64_t> free_bytes = std::nullopt);

/// Opens an existing file for writing, cut back to its first `size` bytes and positioned
/// there (what an interrupted run wrote up to its checkpoint); returns the fd, which the
/// caller closes. Throws FatalError when the file is missing or shorter than `size`.
int reopen_cut_back(const std::string& path, uint64_t size);

/// A file opened for writing (created or truncated, mode 0644), closed on destruction.
/// Unbuffered: every write_all() is a write(2) loop.
class OutputFile {
 public:
  OutputFile() = default;
  /// Opens `path`; throws FatalError if it cannot.
  explicit OutputFile(std::string path);
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  /// Closes without checking; call close() to learn about errors.
  ~OutputFile();

  /// Opens `path`, closing (unchecked) any file already open. Throws FatalError.
  void open(std::string path);
  /// Reopens an existing file cut back to its first `size` bytes, to append after them
  /// (convert --resume). Throws FatalError when it is missing or shorter than `size`.
  void reopen_at(std::string path, uint64_t size);
  /// Writes all of `data`, retrying partial writes and EINTR. Throws FatalError.
  void write_all(std::span<const uint8_t> data);
  /// Bytes written since open().
  uint64_t position() const { return position_; }
  /// fsync(2)s the file (a no-op for pipes and devices that cannot sync). Throws FatalError.
  void sync();
  /// Closes the file; throws FatalError if close(2) reports an error. No-op if not open.
  void close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t position_ = 0;
};

/// rename(2)s `from` to `to`, then fsyncs the parent directory of `to` so the new
/// name survives a crash. Throws FatalError.
void atomic_rename(const std::string& from, const std::string& to);

/// Replaces `path` with `content` atomically: writes path + ".tmp", fsyncs it, renames it
/// over `path`. Throws FatalError (the temp file is removed on failure).
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace tarmac
