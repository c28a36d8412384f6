// tarmac column merge|ls|rm: flags -> lib/columns -> summary + exit code.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/errors.h"
#include "apps/progress.h"
#include "apps/signals.h"
#include "columns/column_ops.h"
#include "common/bytes.h"
#include "common/error.h"

namespace tarmac::cli {

namespace {

std::string command_line(const GlobalFlags& g) {
  std::string s;
  for (const auto& a : g.argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// A merge's progress on stderr: a redrawn line on a terminal; in a log (Slurm's), a line every
// 10 s and at each phase's end once the merge has run 10 s (a short merge prints only its summary).
std::function<void(const ColumnMergeProgress&)> show_progress(bool terminal) {
  return [terminal, last_plain = 0.0](const ColumnMergeProgress& p) mutable {
    if (!terminal && (p.seconds < 10 || (!p.final && p.seconds - last_plain < 10))) return;
    last_plain = p.seconds;
    cli::print_bytes_progress(std::string("column merge: ") + p.phase, p.bytes_done, p.bytes_total,
                              p.seconds, terminal, p.final);
  };
}

}  // namespace

nlohmann::ordered_json columns_json(const std::vector<ColumnInfo>& columns) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const ColumnInfo& c : columns)
    j.push_back({{"name", c.name},
                 {"merged", c.merged},
                 {"samples", c.samples},
                 {"dtype", c.dtype},
                 {"shape", c.shape},
                 {"bytes", c.bytes},
                 {"fn", c.fn},
                 {"ok", c.problem.empty()},
                 {"problem", c.problem}});
  return j;
}

Runner setup_column(CLI::App& app, const GlobalFlags& g) {
  app.require_subcommand(1);
  app.fallthrough();  // --json, -q, -v may follow the subcommand's name
  auto o = std::make_shared<ColumnMergeOptions>();
  auto ls_dir = std::make_shared<std::string>();
  auto rm_dir = std::make_shared<std::string>();
  auto rm_name = std::make_shared<std::string>();

  CLI::App* merge = app.add_subcommand(
      "merge", "Join a derived column's parts (one per rank) into DIR/columns/NAME.safetensors");
  merge->add_option("dir", o->dir, "The dataset directory")->required();
  merge->add_option("name", o->name, "The column (derive --name)")->required();
  merge->add_flag("--keep-parts", o->keep_parts,
                  "Keep DIR/columns/NAME.parts/ after merging (by default it is removed once the "
                  "merged file is written)");
  merge->footer(
      "Refuses (exit 1, nothing written) while any sample lacks an output, naming how many,\n"
      "the ranks and the sample ranges; and refuses parts computed from another version of the\n"
      "dataset or with another number of ranks.\n\n"
      "Example (docs/cookbook.md, SDXL):\n"
      "  torchrun --nproc_per_node 8 -m tarmac.derive out/ --name latents --fn vae:encode\n"
      "  tarmac column merge out/ latents && tarmac verify out/");
  CLI::App* ls = app.add_subcommand("ls", "List a dataset's columns: merged, or parts only");
  ls->add_option("dir", *ls_dir, "The dataset directory")->required();
  CLI::App* rm = app.add_subcommand("rm", "Remove a column: its merged file and its parts");
  rm->add_option("dir", *rm_dir, "The dataset directory")->required();
  rm->add_option("name", *rm_name, "The column")->required();
  app.footer(
      "Derived columns hold one model output per sample (VAE latents, embeddings), computed by\n"
      "`python -m tarmac.derive` on every rank; docs/cli.md, \"Derived columns\".");

  return [=, &g]() -> int {
    if (merge->parsed()) {
      o->command = command_line(g);
      o->stop = &stop_on_signals();
      if (g.verbosity >= 0 && !g.json) {
        o->progress = show_progress(::isatty(STDERR_FILENO) != 0);
      }
      ColumnMergeResult r;
      try {
        r = merge_column(*o);
      } catch (const Interrupted& e) {
        spdlog::warn("{}; nothing was merged (run the merge again)", e.what());
        return signal_exit_code(e.signal());
      }
      if (g.json) {
        print_json(nlohmann::ordered_json{{"column", o->name},
                                          {"path", r.path},
                                          {"samples", r.samples},
                                          {"world", r.world},
                                          {"parts", r.parts},
                                          {"chunks", r.chunks},
                                          {"dtype", r.dtype},
                                          {"shape", r.shape},
                                          {"bytes", r.bytes},
                                          {"parts_removed", r.parts_removed},
                                          {"seconds", r.seconds}});
      } else if (g.verbosity >= 0) {
        std::printf("merged column '%s' of %llu samples from %llu part(s) into %s: %s %s, %s%s\n",
                    o->name.c_str(), static_cast<unsigned long long>(r.samples),
                    static_cast<unsigned long long>(r.parts), r.path.c_str(), r.dtype.c_str(),
                    r.shape.c_str(), format_bytes(r.bytes).c_str(),
                    r.parts_removed ? "; parts removed" : "");
      }
      return kOk;
    }
    if (ls->parsed()) {
      const std::vector<ColumnInfo> cols = list_columns(*ls_dir);
      if (g.json) {
        print_json(columns_json(cols));
      } else if (g.verbosity >= 0) {
        if (cols.empty()) std::printf("no columns in %s\n", ls_dir->c_str());
        for (const ColumnInfo& c : cols) {
          if (c.merged)
            std::printf("%-20s %s %s, %llu samples, %s, fn %s%s%s\n", c.name.c_str(),
                        c.dtype.c_str(), c.shape.c_str(),
                        static_cast<unsigned long long>(c.samples), format_bytes(c.bytes).c_str(),
                        c.fn.c_str(), c.problem.empty() ? "" : "  PROBLEM: ", c.problem.c_str());
          else
            std::printf("%-20s %s\n", c.name.c_str(), c.problem.c_str());
        }
      }
      bool ok = true;
      for (const ColumnInfo& c : cols) ok = ok && c.problem.empty();
      return ok ? kOk : kDataError;
    }
    remove_column(*rm_dir, *rm_name, command_line(g));
    if (g.verbosity >= 0 && !g.json)
      std::printf("removed column '%s' from %s\n", rm_name->c_str(), rm_dir->c_str());
    if (g.json) print_json(nlohmann::ordered_json{{"removed", *rm_name}});
    return kOk;
  };
}

}  // namespace tarmac::cli
