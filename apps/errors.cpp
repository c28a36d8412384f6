#include "apps/errors.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "apps/commands.h"
#include "apps/signals.h"
#include "common/error.h"

namespace tarmac::cli {
namespace {

bool g_json_printed = false;
std::mutex g_errors_mu;
std::vector<std::string> g_errors;  // error messages logged, for the JSON error document

// Keeps the messages of errors (for print_json_error).
class ErrorCapture : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level < spdlog::level::err) return;
    std::lock_guard lk(g_errors_mu);
    g_errors.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}
};

bool no_color() {
  const char* v = std::getenv("NO_COLOR");  // https://no-color.org: set and not empty
  return v && *v;
}

const char* error_code(int exit_code) {
  if (exit_code == kUsageError) return "usage_error";
  if (exit_code == kDamageFound) return "damage_found";
  if (exit_code > 128) return "interrupted";
  return "data_error";
}

// The option names `app` knows ("--size", "-o"), and its subcommands' names.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

}  // namespace

int error_exit_code(const std::exception& e) {
  switch (grade_of(e)) {
    case Grade::Usage:
      return kUsageError;
    case Grade::Interrupted: {
      const auto* t = dynamic_cast<const Error*>(&e);
      return t && t->signal() > 0 ? signal_exit_code(t->signal()) : kDataError;
    }
    case Grade::Sample:
    case Grade::Fatal:
    case Grade::Internal:
      break;
  }
  return kDataError;
}

void print_json(const nlohmann::ordered_json& j) {
  std::printf("%s\n",
              j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  std::fflush(stdout);
  g_json_printed = true;
}

void install_logger(int verbosity) {
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      no_color() ? spdlog::color_mode::never : spdlog::color_mode::automatic);
  auto capture = std::make_shared<ErrorCapture>();
  auto logger =
      std::make_shared<spdlog::logger>("tarmac", spdlog::sinks_init_list{console, capture});
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("tarmac: %^%l%$: %v");
  spdlog::set_level(verbosity < 0   ? spdlog::level::err
                    : verbosity > 0 ? spdlog::level::debug
                                    : spdlog::level::info);
}

void print_json_error(int exit_code) {
  if (exit_code == 0 || g_json_printed) return;
  std::vector<std::string> messages;
  {
    std::lock_guard lk(g_errors_mu);
    messages = g_errors;
  }
  nlohmann::ordered_json j;
  j["error"] = {{"message", messages.empty() ? std::string("failed") : messages.front()},
                {"messages", messages},
                {"code", error_code(exit_code)},
                {"exit_code", exit_code}};
  print_json(j);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_name(const std::string& word, const std::vector<std::string>& known) {
  const size_t len = word.size();
  const size_t most = len <= 4 ? 1 : len <= 8 ? 2 : 3;
  std::string best;
  size_t best_d = most + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(word, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

std::string parse_error_text(const CLI::ParseError& e, const CLI::App& app,
                             const std::vector<std::string>& args) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  // The command: the first word that is not an option.
  const CLI::App* cmd = nullptr;
  for (const auto& a : args) {
    if (a.starts_with("-")) continue;
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == a) cmd = sub;
    if (!cmd) {
      const std::string near = closest_name(a, commands);
      return "unknown command '" + a + "'" +
             (near.empty() ? "" : "; did you mean '" + near + "'?") +
             " (run 'tarmac --help' for the commands)";
    }
    break;
  }
  std::string text = e.what();
  if (!cmd) return text + " (run 'tarmac --help' for the commands)";
  const std::vector<std::string> known = option_names(*cmd);
  for (const auto& a : args) {
    if (!a.starts_with("-") || a == "-" || a == "--") continue;
    const std::string name = a.substr(0, a.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    if (name.size() == 2 || !name.starts_with("--")) continue;  // -j4 and the like
    const std::string near = closest_name(name, known);
    text += near.empty() ? "; unknown option '" + name + "'"
                         : "; unknown option '" + name + "': did you mean '" + near + "'?";
  }
  return text + " (run 'tarmac " + cmd->get_name() + " --help' for its options)";
}

void early_error(const std::string& text) {
  const bool color = !no_color() && ::isatty(STDERR_FILENO);
  std::fprintf(stderr, "tarmac: %serror%s: %s\n", color ? "\033[31m\033[1m" : "",
               color ? "\033[m" : "", text.c_str());
  std::lock_guard lk(g_errors_mu);
  g_errors.push_back(text);
}

}  // namespace tarmac::cli
