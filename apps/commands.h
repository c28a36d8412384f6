#pragma once
// The subcommands of the tarmac CLI. Each registers its flags on a CLI11 subcommand and
// returns the function that runs it (an exit code; see docs/cli.md).
#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tarmac {
struct DatasetSummary;
struct ColumnInfo;
}  // namespace tarmac

namespace tarmac::cli {

/// The exit statuses (docs/cli.md, "Exit codes and errors"); 128 + N for a stop by signal N.
enum ExitCode {
  kOk = 0,
  kDataError = 1,   ///< a failure: the command could not do what it was asked
  kUsageError = 2,  ///< the options or arguments are wrong; nothing was read or written
  kDamageFound = 3  ///< verify read the whole dataset and found it damaged (a problem listed)
};

struct GlobalFlags {
  bool json = false;
  int verbosity = 0;              ///< -1 quiet, 0 normal, 1 verbose
  std::vector<std::string> argv;  ///< the full command line, for the manifest
};

using Runner = std::function<int()>;

Runner setup_convert(CLI::App& app, const GlobalFlags& g);
Runner setup_info(CLI::App& app, const GlobalFlags& g);
Runner setup_verify(CLI::App& app, const GlobalFlags& g);
Runner setup_cat(CLI::App& app, const GlobalFlags& g);
Runner setup_ls(CLI::App& app, const GlobalFlags& g);
Runner setup_merge(CLI::App& app, const GlobalFlags& g);
Runner setup_column(CLI::App& app, const GlobalFlags& g);
Runner setup_bench(CLI::App& app, const GlobalFlags& g);
Runner setup_preview(CLI::App& app, const GlobalFlags& g);

/// The derived columns as JSON objects (`column ls --json`, `info --json`).
nlohmann::ordered_json columns_json(const std::vector<ColumnInfo>& columns);

/// "1344x768 (120), 1024x1024 (80), and 3 more sizes": the `most` most frequent image sizes.
std::string sizes_text(const DatasetSummary& s, size_t most = 8);

}  // namespace tarmac::cli
