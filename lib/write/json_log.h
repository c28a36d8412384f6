#pragma once
// An append-only JSON-lines file (the manifest's "skipped", "ignored" and "duplicates" lists
// while a conversion runs): kept on disk, so that the lists cost no memory and survive an
// interruption together with the checkpoint.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/error.h"
#include "write/file_util.h"

namespace tarmac {

class JsonLog {
 public:
  /// A new log, or (resume) the interrupted run's cut back to `resume_size` bytes.
  JsonLog(const std::filesystem::path& path, std::optional<uint64_t> resume_size) {
    if (resume_size)
      file_.reopen_at(path.string(), *resume_size);
    else
      file_.open(path.string());
  }
  void add(const nlohmann::ordered_json& j) {
    buf_ += j.dump();
    buf_ += '\n';
    if (buf_.size() >= (1 << 16)) flush();
  }
  /// Flushes and syncs; returns the size to resume from.
  uint64_t checkpoint() {
    flush();
    file_.sync();
    return file_.position();
  }
  /// Every record, in order (closes the log).
  nlohmann::ordered_json read_all() {
    flush();
    const std::string path = file_.path();
    file_.close();
    auto all = nlohmann::ordered_json::array();
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      all.push_back(nlohmann::ordered_json::parse(line));
    if (in.bad()) throw FatalError("cannot read back '" + path + "'");
    return all;
  }

 private:
  void flush() {
    file_.write_all({reinterpret_cast<const uint8_t*>(buf_.data()), buf_.size()});
    buf_.clear();
  }
  OutputFile file_;
  std::string buf_;
};

}  // namespace tarmac
