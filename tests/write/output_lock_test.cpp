#include "write/output_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "test_util.h"

namespace fs = std::filesystem;
using tarmac::OutputLock;
using tarmac::test::TempDir;

namespace {

// A child process that takes the lock on `dir` and holds it until killed. Returns its pid once
// it holds the lock.
pid_t holder_process(const fs::path& dir) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    try {
      const OutputLock lock(dir, "holder --for the test");
      [[maybe_unused]] const ssize_t n = ::write(ready[1], "k", 1);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  return pid;
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

std::string error_of(const fs::path& dir) {
  try {
    const OutputLock lock(dir, "second");
  } catch (const tarmac::FatalError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an output lock excludes a second writer, names the holder, and is gone with it") {
  TempDir tmp;
  const fs::path dir = fs::path(tmp.path()) / "out" / "nested";  // created by the lock
  const pid_t pid = holder_process(dir);
  CHECK(fs::is_directory(dir));
  const std::string msg = error_of(dir);
  CHECK_THAT(msg, Catch::Contains("is in use by another tarmac"));
  CHECK_THAT(msg, Catch::Contains("pid " + std::to_string(pid)));
  CHECK_THAT(msg, Catch::Contains("running: holder --for the test"));
  CHECK_THAT(msg, Catch::Contains("goes away by itself"));
  // SIGKILL: no destructor ran, the file stays, but the kernel dropped the lock with the process.
  kill_and_reap(pid);
  CHECK(fs::exists(dir / ".tarmac-lock"));
  {
    const OutputLock lock(dir, "after the holder died");
    CHECK(lock.held());
    std::ifstream f(dir / ".tarmac-lock");
    const std::string record{std::istreambuf_iterator<char>(f), {}};
    CHECK_THAT(record, Catch::Contains("after the holder died"));
    CHECK_THAT(record, Catch::Contains("\"pid\":" + std::to_string(::getpid())));
  }
  CHECK_FALSE(fs::exists(dir / ".tarmac-lock"));  // a clean release leaves no file
}

TEST_CASE("an output lock excludes a second lock in the same process; released, it can be taken") {
  TempDir tmp;
  {
    const OutputLock first(tmp.path(), "first");
    CHECK_THAT(error_of(tmp.path()), Catch::Contains("is in use by another tarmac"));
  }
  CHECK(error_of(tmp.path()).empty());
}

TEST_CASE("an output that is a file, and TARMAC_NO_LOCK") {
  TempDir tmp;
  const fs::path file = fs::path(tmp.path()) / "plain";
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH(OutputLock(file, "c"), Catch::Contains("exists and is not a directory"));

  const fs::path dir = fs::path(tmp.path()) / "d";
  const OutputLock first(dir, "first");
  ::setenv("TARMAC_NO_LOCK", "1", 1);
  {
    const OutputLock unlocked(dir, "second, unprotected");
    CHECK_FALSE(unlocked.held());
  }
  ::unsetenv("TARMAC_NO_LOCK");
  CHECK(fs::exists(dir / ".tarmac-lock"));  // the unlocked one removed nothing
}

TEST_CASE("empty_but_lock") {
  TempDir tmp;
  CHECK(tarmac::empty_but_lock(tmp.path()));
  std::ofstream(fs::path(tmp.path()) / ".tarmac-lock") << "";
  CHECK(tarmac::empty_but_lock(tmp.path()));
  std::ofstream(fs::path(tmp.path()) / "x") << "";
  CHECK_FALSE(tarmac::empty_but_lock(tmp.path()));
}
