#pragma once
// SIGINT/SIGTERM for the commands that write a dataset: the first asks the run to stop
// gracefully, the second to stop at once (both still checkpoint), the third ends the process
// with the signal's default action. A run still going kStopExitSeconds after the first signal
// (2 s after the second) is ended by a watchdog.
#include <string>
#include <vector>

#include "common/stop.h"

namespace tarmac::cli {

/// Seconds from the first signal to the exit of a run that has not stopped by then (blocked in
/// a read that never returns): it exits with the signal's status, its last checkpoint kept.
inline constexpr int kStopExitSeconds = 10;

/// Installs the handlers (once) and returns the request they set; starts the watchdog that
/// ends a run which does not stop within kStopExitSeconds of the first signal.
const StopRequest& stop_on_signals();

/// The exit status of a run stopped by `signal`: 128 + its number, as a shell reports it.
int signal_exit_code(int signal);

/// `argv` as one shell command line, arguments quoted where a shell would split or expand them.
std::string command_text(const std::vector<std::string>& argv);

}  // namespace tarmac::cli
