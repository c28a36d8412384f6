#include "format/lock_record.h"

#include <unistd.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tarmac::format {
namespace {

using json = nlohmann::ordered_json;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace

LockRecord this_process_lock_record(std::string command, std::string run) {
  return {std::move(run), static_cast<long long>(::getpid()), host_name(), utc_now(),
          std::move(command)};
}

std::string lock_record_text(const LockRecord& r) {
  json j;
  if (!r.run.empty()) j["run"] = r.run;
  j["pid"] = r.pid;
  j["host"] = r.host;
  j["started"] = r.started;
  j["command"] = r.command;
  return j.dump() + "\n";
}

LockRecord parse_lock_record(std::string_view text) {
  try {
    const json j = json::parse(text);
    LockRecord r;
    r.run = j.value("run", std::string());
    r.pid = j.at("pid").get<long long>();
    r.host = j.at("host").get<std::string>();
    r.started = j.at("started").get<std::string>();
    r.command = j.at("command").get<std::string>();
    return r;
  } catch (const json::exception& e) {
    throw ParseError(std::string("not a lock record: ") + e.what());
  }
}

std::string holder_description(const LockRecord& r) {
  return "pid " + std::to_string(r.pid) + " on host " + r.host + ", since " + r.started +
         ", running: " + r.command;
}

}  // namespace tarmac::format
