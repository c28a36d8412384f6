#include "source/pipe_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

#include "common/crc32.h"
#include "common/error.h"
#include "common/printable.h"

extern char** environ;

namespace tarmac {
namespace {

constexpr std::string_view kPrefix = "pipe:";
constexpr size_t kStderrKept = 4096;
constexpr size_t kLineShown = 300;
constexpr int kPollMs = 100;
// A stopped command gets SIGTERM, then SIGKILL if it has not ended after this long.
constexpr auto kTermGrace = std::chrono::seconds(1);

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// `fd` moved to a number >= 3 (close-on-exec), so that the child's dup2 onto 0, 1 and 2 never
// overwrites one of the others (tarmac run with a standard stream closed).
int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

// True once `pid` has ended (a zombie, not reaped: its process group id stays taken).
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string describe(int status) {
  if (WIFEXITED(status))
    return "the command exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "the command was killed by " + signal_name(WTERMSIG(status));
  return "the command ended with wait status " + std::to_string(status);
}

// The last line of `text` that holds more than blanks (a '\r' ends a line too: progress
// meters), made printable and cut to kLineShown bytes; "" when none.
std::string last_line(std::string_view text) {
  const auto blank = [](char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; };
  size_t end = text.size();
  while (end > 0 && blank(text[end - 1])) --end;
  const size_t begin = text.find_last_of("\r\n", end == 0 ? 0 : end - 1);
  std::string line =
      printable(text.substr(begin == std::string_view::npos ? 0 : begin + 1,
                            end - (begin == std::string_view::npos ? 0 : begin + 1)));
  if (line.size() > kLineShown) {
    size_t cut = kLineShown;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line = line.substr(0, cut) + "...";
  }
  return line;
}

}  // namespace

bool is_pipe(std::string_view name) {
  return name.starts_with(kPrefix);
}

std::string pipe_command(std::string_view name) {
  std::string command(name.substr(kPrefix.size()));
  if (command.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UsageError("input '" + printable(name) +
                     "' names no command: write pipe:COMMAND, whose standard output is the "
                     "input (e.g. 'pipe:aws s3 cp s3://bucket/shard-000.tar -')");
  return command;
}

void PipeRuns::check(const std::string& name, uint64_t size, uint32_t crc) {
  std::lock_guard lk(mu_);
  const auto [it, first] = first_.try_emplace(name, size, crc);
  if (first || it->second == std::pair(size, crc)) return;
  const auto [was_size, was_crc] = it->second;
  std::string sizes;
  if (was_size != size)
    sizes = ", " + std::to_string(was_size) + " then " + std::to_string(size) + " bytes";
  throw PipeOutputChanged(printable(name) + " gave other bytes on its second run (CRC-32 " +
                          crc32_hex(was_crc) + " then " + crc32_hex(crc) + sizes +
                          "): tarmac reads a pipe: input twice for --on-duplicate last / "
                          "--classes-from-dirs; make the command deterministic or write its "
                          "output to a file");
}

PipeStream::PipeStream(std::string name, const StopRequest* stop)
    : name_(std::move(name)), stop_(stop) {
  const std::string command = pipe_command(name_);
  if (stop_ && stop_->requested()) fail("stopped", false);
  const auto cannot_start = [this](const char* what, int err) {
    return FatalError("cannot run '" + printable(name_) + "': " + what + ": " + std::strerror(err) +
                      " (too many processes or open files?)");
  };
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw cannot_start("cannot make a pipe", errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw cannot_start("cannot make a pipe", e);
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int child_in = above_stdio(null_fd), child_out = above_stdio(out[1]),
            child_err = above_stdio(err[1]);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child of a process with threads: async-signal-safe calls only, until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // tarmac killed (SIGKILL): the command goes too
    if (::getppid() != parent) ::_exit(127);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (const int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGXFSZ})
      ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (child_in < 0 || child_out < 0 || child_err < 0 || ::dup2(child_in, 0) < 0 ||
        ::dup2(child_out, 1) < 0 || ::dup2(child_err, 2) < 0)
      ::_exit(127);
    ::close_range(3, ~0U, 0);  // whatever a library opened without close-on-exec
    ::execve("/bin/sh", const_cast<char* const*>(argv), environ);
    static constexpr char kMsg[] = "tarmac: cannot run /bin/sh\n";
    [[maybe_unused]] const ssize_t n = ::write(2, kMsg, sizeof kMsg - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  for (int fd : {child_in, child_out, child_err})
    if (fd >= 0) ::close(fd);
  if (pid < 0 || child_in < 0 || child_out < 0 || child_err < 0) {
    ::close(out[0]);
    ::close(err[0]);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      reap(pid);
    }
    throw cannot_start(pid < 0 ? "cannot start a process" : "cannot open /dev/null",
                       pid < 0 ? fork_errno : EMFILE);
  }
  ::setpgid(pid, pid);  // as the child does, whichever runs first (an error: it exec'd already)
  pid_ = pid;
  out_fd_ = out[0];
  err_fd_ = err[0];
  ::fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

PipeStream::~PipeStream() {
  kill_and_reap();
  close_fd(out_fd_);
  close_fd(err_fd_);
}

// Whatever the command wrote on its standard error by now, its last kStderrKept bytes kept.
void PipeStream::read_stderr() {
  char buf[4096];
  while (err_fd_ >= 0) {
    const ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: nothing more for now
    if (n == 0) {
      close_fd(err_fd_);
      return;
    }
    err_tail_.append(buf, static_cast<size_t>(n));
    if (err_tail_.size() > kStderrKept) err_tail_.erase(0, err_tail_.size() - kStderrKept);
  }
}

size_t PipeStream::read(uint8_t* out, size_t size) {
  if (!failure_.empty()) throw FatalError(failure_);
  if (ended_) return 0;
  while (true) {
    if (stop_ && stop_->requested()) {
      kill_and_reap();
      fail("stopped", false);
    }
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    const int r = ::poll(fds, 2, kPollMs);
    if (r < 0 && errno != EINTR) {
      const int e = errno;
      kill_and_reap();
      fail(std::string("cannot wait for its output: ") + std::strerror(e), false);
    }
    if (r <= 0) continue;
    if (fds[1].revents) read_stderr();
    if (!fds[0].revents) continue;
    const ssize_t n = ::read(out_fd_, out, size);
    if (n > 0) return static_cast<size_t>(n);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      const int e = errno;
      kill_and_reap();
      fail(std::string("cannot read its output: ") + std::strerror(e), false);
    }
    close_fd(out_fd_);  // the output ended: its exit status says whether it is whole
    wait_exit();
    return 0;
  }
}

// After the output ended: waits for the command (reading its standard error, so that it is
// never blocked writing there), kills what it left running in its group, reaps it, and fails
// unless it exited with status 0.
void PipeStream::wait_exit() {
  while (!has_exited(pid_)) {
    if (stop_ && stop_->requested()) {
      kill_and_reap();
      fail("stopped", false);
    }
    pollfd p{err_fd_, POLLIN, 0};
    if (err_fd_ >= 0 && ::poll(&p, 1, 20) > 0)
      read_stderr();
    else if (err_fd_ < 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid_, SIGKILL);  // what it left in its group; the zombie keeps the group id taken
  const int status = reap(pid_);
  pid_ = -1;
  read_stderr();
  close_fd(err_fd_);
  if (status != 0) fail(describe(status), true);
  ended_ = true;
}

void PipeStream::kill_and_reap() {
  if (pid_ < 0) return;
  close_fd(out_fd_);  // a writer blocked on a full pipe gets EPIPE
  ::kill(-pid_, SIGTERM);
  const auto deadline = Clock::now() + kTermGrace;
  while (!has_exited(pid_) && Clock::now() < deadline) {
    read_stderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(-pid_, SIGKILL);  // what SIGTERM did not end, and what the command left in its group
  reap(pid_);
  pid_ = -1;
  read_stderr();
  close_fd(err_fd_);
}

void PipeStream::fail(const std::string& why, bool quote_stderr) {
  failure_ = "cannot read '" + printable(name_) + "': " + why;
  if (quote_stderr) {
    const std::string line = last_line(err_tail_);
    failure_ += line.empty() ? " (nothing on its standard error)"
                             : "; its standard error ends: \"" + line + "\"";
  }
  throw FatalError(failure_);
}

}  // namespace tarmac
