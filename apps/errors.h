#pragma once
// How the CLI reports errors: every one as "tarmac: error: ..." on stderr (colour unless
// NO_COLOR), with "did you mean" for a mistyped command or option, and, under --json, also as
// one JSON document on stdout (docs/cli.md, "Exit codes and errors").
#include <CLI/CLI.hpp>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tarmac::cli {

/// The exit status for what a library call threw, by its grade (common/error.h): 2 for a usage
/// error (the options or arguments are wrong), 128 + the signal for a stop by a signal, 1 for
/// every other failure. The one mapping: every command's failures go through it.
int error_exit_code(const std::exception& e);

/// Prints `j` on stdout as the command's JSON document (and notes that one was printed).
void print_json(const nlohmann::ordered_json& j);

/// The logger every command writes to: stderr, "tarmac: LEVEL: message", coloured on a terminal
/// unless NO_COLOR is set and not empty; error messages are also kept for error_json().
void install_logger(int verbosity);

/// Under --json, when the command failed (`exit_code` != 0) and printed no JSON document of
/// its own: {"error": {"message", "messages", "code", "exit_code"}} on stdout.
void print_json_error(int exit_code);

/// Levenshtein distance (insert, delete, substitute one character: 1 each).
size_t edit_distance(const std::string& a, const std::string& b);

/// The known name closest to `word` when it is near enough to be a typo (at most 1 edit for up
/// to 4 characters, 2 up to 8, else 3), else "".
std::string closest_name(const std::string& word, const std::vector<std::string>& known);

/// A command-line error as the user reads it: CLI11's message, "did you mean" for a mistyped
/// command or option of `app` (the words in `args`, argv without the program), and where the
/// help is. For "tarmac: error: ".
std::string parse_error_text(const CLI::ParseError& e, const CLI::App& app,
                             const std::vector<std::string>& args);

/// Logs `text` as an error before the logger exists (a parse error): "tarmac: error: text".
void early_error(const std::string& text);

}  // namespace tarmac::cli
