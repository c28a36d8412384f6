#pragma once
// `pipe:COMMAND` inputs, WebDataset's convention: the input is what COMMAND writes on its
// standard output. The command runs under /bin/sh -c with the user's environment, standard input
// /dev/null and its standard error kept (the last few KiB, quoted when it fails), in a process
// group of its own that a stop request, a failed read or tarmac's end kills; it is always reaped.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "common/stop.h"

namespace tarmac {

/// True for an input named "pipe:COMMAND".
bool is_pipe(std::string_view name);

/// The command of a "pipe:COMMAND" name. Throws UsageError when it names none ("pipe:", or only
/// spaces after it), saying how to write one.
std::string pipe_command(std::string_view name);

/// A command whose output differs between two reads of one run.
class PipeOutputChanged : public FatalError {
 public:
  using FatalError::FatalError;
};

/// What each pipe: command gave the first time a run read it to its end (size and CRC-32 of
/// its whole output), so that the run's later reads of it can be compared: --on-duplicate last
/// and --classes-from-dirs read every input twice (a pre-pass of names, then the conversion),
/// and a command run twice may print other bytes (a listing that changed, a counter), which
/// would keep keys or number classes by bytes the conversion never read. Thread-safe.
class PipeRuns {
 public:
  /// Records the first read of `name` to its end; throws PipeOutputChanged, naming the command
  /// and both CRC-32s, for a later read whose bytes differ.
  void check(const std::string& name, uint64_t size, uint32_t crc);

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<uint64_t, uint32_t>> first_;
};

/// A command's standard output, read front to back. Single-threaded.
class PipeStream {
 public:
  /// Starts the command of `name` ("pipe:COMMAND", kept for messages). Throws FatalError when it
  /// cannot be started (no process or pipe left), or when `stop` (may be null) has a request.
  PipeStream(std::string name, const StopRequest* stop = nullptr);
  /// Kills the command's process group if it still runs, and reaps it.
  ~PipeStream();
  PipeStream(const PipeStream&) = delete;
  PipeStream& operator=(const PipeStream&) = delete;

  /// Up to `size` next bytes into `out`; 0 once the output ended and the command exited with
  /// status 0. Throws FatalError, one line naming the input, when the command exited otherwise
  /// or was killed by a signal (with the last line of its standard error), or when a stop was
  /// requested meanwhile (the command's group is killed first).
  size_t read(uint8_t* out, size_t size);

  const std::string& name() const { return name_; }
  /// The command's process id, which is its process group's (for tests); -1 once reaped.
  pid_t pid() const { return pid_; }

 private:
  void read_stderr();
  void wait_exit();
  void kill_and_reap();
  /// Throws (and keeps) the one line naming the input and `why`, with the last line of the
  /// command's standard error when `quote_stderr`.
  [[noreturn]] void fail(const std::string& why, bool quote_stderr);

  std::string name_;
  const StopRequest* stop_ = nullptr;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string err_tail_;  // the last kStderrKept bytes of its standard error
  bool ended_ = false;    // the output ended and the command exited with status 0
  std::string failure_;   // set once it failed: read() throws it again
};

}  // namespace tarmac
