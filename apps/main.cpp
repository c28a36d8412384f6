// tarmac: converts tar archives of images + labels into training-ready datasets.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <new>
#include <string>

#include "apps/commands.h"
#include "apps/errors.h"
#include "common/version.h"
#include "format/names.h"

namespace {

struct Command {
  const char* name;
  const char* description;
  tarmac::cli::Runner (*setup)(CLI::App&, const tarmac::cli::GlobalFlags&);
};

// The subcommands, in the order --help lists them.
const Command kCommands[] = {
    {"convert", "Convert archives of images + labels into image shards + one annotation file",
     tarmac::cli::setup_convert},
    {"info", "Summarise a converted dataset: counts, schema, shards, sizes",
     tarmac::cli::setup_info},
    {"verify", "Check that a dataset is complete and intact: every byte, optionally every decode",
     tarmac::cli::setup_verify},
    {"cat", "Write one sample's stored image (or dense map) bytes, or its labels as JSON",
     tarmac::cli::setup_cat},
    {"preview", "Draw a contact sheet of samples: images, keys, points, boxes, dense maps (a PNG)",
     tarmac::cli::setup_preview},
    {"ls", "List a dataset's sample keys (-l: index, size, width x height)", tarmac::cli::setup_ls},
    {"merge", "Join datasets converted in parts (convert --shard I/N) into one",
     tarmac::cli::setup_merge},
    {"column",
     "Derived columns (model outputs per sample): merge the parts of derive, list, remove",
     tarmac::cli::setup_column},
    {"bench",
     "Measure how fast a dataset reads: open time, random access, decoding with 1..N threads",
     tarmac::cli::setup_bench},
};

}  // namespace

int main(int argc, char** argv) try {
  // A write past `ulimit -f` then fails with EFBIG, which the writers report naming the file
  // and the limit (and keep the checkpoint), instead of SIGXFSZ killing tarmac without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "tarmac converts raw training data (tar archives of images with per-sample label files)\n"
      "into training-ready data, once: pre-cropped images in plain tar shards and every label\n"
      "in ONE memory-mappable annotation file (" +
          std::string(tarmac::format::kLabelsFile) +
          ").\n\n"
          "  tarmac convert raw/*.tar.gz -o out/ --crop center --size 256\n"
          "  tarmac info out/\n\n"
          "Run 'tarmac COMMAND --help' for each command's options; docs/cli.md has them all.",
      "tarmac"};
  app.set_version_flag("--version", std::string("tarmac ") + tarmac::kVersion);
  app.require_subcommand(1);
  tarmac::cli::GlobalFlags g;
  g.argv.assign(argv, argv + argc);
  bool quiet = false, verbose = false;
  std::map<CLI::App*, tarmac::cli::Runner> runners;
  for (const auto& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    sub->add_flag("--json", g.json, "Print one JSON document on stdout instead of text");
    sub->add_flag("-q,--quiet", quiet, "Only errors on stderr");
    sub->add_flag("-v,--verbose", verbose, "More detail on stderr");
    runners[sub] = c.setup(*sub, g);
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    tarmac::cli::early_error(tarmac::cli::parse_error_text(e, app, args));
    if (json) tarmac::cli::print_json_error(tarmac::cli::kUsageError);
    return tarmac::cli::kUsageError;
  }
  tarmac::cli::install_logger(quiet ? -1 : verbose ? 1 : 0);
  g.verbosity = quiet ? -1 : verbose ? 1 : 0;
  int code = tarmac::cli::kUsageError;
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    // Each command reports its own errors; this is for what none of them expected (out of
    // memory, a filesystem error outside the library's checks): a message, not an abort.
    try {
      code = run();
    } catch (const std::bad_alloc&) {  // convert names its phase itself; the others, the command
      spdlog::error(
          "out of memory while running 'tarmac {}' (std::bad_alloc): free memory, or lower the "
          "flags that bound it (docs/cli.md)",
          sub->get_name());
      code = tarmac::cli::kDataError;
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      code = tarmac::cli::error_exit_code(e);
    }
  }
  if (g.json) tarmac::cli::print_json_error(code);
  return code;
} catch (const std::exception& e) {  // before the logger exists (e.g. setting up the options)
  tarmac::cli::early_error(e.what());
  return tarmac::cli::kDataError;
}
