#pragma once
// The lock record: who holds an output's lock (docs/cli.md, "One writer per output directory").
// A local output's `.tarmac-lock` file and an `-o s3://` prefix's lock object (kLockFile both)
// hold one, written just after the lock is taken, so that a second writer's refusal can say
// who holds it. One writer (lock_record_text), one parser (parse_lock_record).
#include <string>
#include <string_view>

namespace tarmac::format {

struct LockRecord {
  std::string run;  ///< -o s3://: the run's id (its --resume takes the lock over); else empty
  long long pid = 0;
  std::string host;
  std::string started;  ///< UTC, "2026-12-02T19:20:00Z"
  std::string command;
};

/// This process's record: its pid, host name, the time now and `command`.
LockRecord this_process_lock_record(std::string command, std::string run = "");

/// The record as one line of JSON (with its newline).
std::string lock_record_text(const LockRecord& r);

/// Parses a record; throws ParseError when it is not one (empty, cut short, another document).
LockRecord parse_lock_record(std::string_view text);

/// "pid 123 on host h, since 2026-12-02T19:20:00Z, running: tarmac convert ..."
std::string holder_description(const LockRecord& r);

}  // namespace tarmac::format
