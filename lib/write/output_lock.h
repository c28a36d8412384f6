#pragma once
// One writer per output directory: an exclusive flock(2) on DIR/.tarmac-lock (format::kLockFile)
// for as long as a command writes into DIR. The kernel (or the NFS server, at its lease's end)
// drops the lock when its holder dies, however it dies, so a lock is never stale; the file
// names the holder for whoever finds it taken. docs/reliability.md says what file systems this
// assumes.
#include <filesystem>
#include <string>

namespace tarmac {

class OutputLock {
 public:
  /// Creates `dir` if needed and takes its lock, recording `command` (what the holder runs) with
  /// this host, pid and the time. Throws FatalError when another process holds it (naming that
  /// holder and what to do), when `dir` is not a directory, or when its file system cannot lock
  /// (unless $TARMAC_NO_LOCK=1: then no lock is taken, and the caller relies on being alone).
  OutputLock(const std::filesystem::path& dir, const std::string& command);
  /// Removes the lock file and releases the lock.
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  /// False when $TARMAC_NO_LOCK=1 had the lock skipped.
  bool held() const { return fd_ >= 0; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

/// True when `dir` holds nothing but, perhaps, its lock file: empty, for a writer holding it.
bool empty_but_lock(const std::filesystem::path& dir);

}  // namespace tarmac
