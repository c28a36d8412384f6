// tarmac merge: flags -> MergeOptions -> tarmac::merge_datasets() -> summary + exit code.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/errors.h"
#include "apps/signals.h"
#include "common/bytes.h"
#include "common/error.h"
#include "format/names.h"
#include "merge/merge.h"

namespace tarmac::cli {

Runner setup_merge(CLI::App& app, const GlobalFlags& g) {
  auto o = std::make_shared<MergeOptions>();
  app.add_option("parts", o->parts,
                 "Dataset directories to join, in order (e.g. the parts of convert --shard I/N)")
      ->required();
  app.add_option("-o,--output", o->output, "Output dataset directory (created; must be empty)")
      ->required();
  app.add_flag("--copy", o->copy,
               "Copy shards instead of hard-linking them (links need one filesystem)");
  app.footer(
      "Example:\n"
      "  for i in 0 1 2 3; do tarmac convert raw/*.tar -o part$i --shard $i/4 --size 256; done\n"
      "  tarmac merge part0 part1 part2 part3 -o out/ && tarmac verify out/\n\n"
      "Samples keep their order within each part; parts follow in the order given. Shards are\n"
      "hard-linked (the parts may be deleted afterwards), so images are never re-encoded.");
  return [o, &g]() -> int {
    o->command_line = g.argv;
    o->stop = &stop_on_signals();
    MergeResult r;
    try {
      r = merge_datasets(*o);
    } catch (const Interrupted& e) {
      spdlog::warn("{}; nothing was written to '{}' (run the merge again)", e.what(), o->output);
      return signal_exit_code(e.signal());
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      if (grade_of(e) != Grade::Usage)
        spdlog::error("merge failed; nothing was written to '{}'", o->output);
      return error_exit_code(e);
    }
    for (const auto& w : r.warnings) spdlog::warn("{}", w);
    if (g.json) {
      nlohmann::ordered_json j = {
          {"output", o->output},          {"parts", o->parts.size()},
          {"samples", r.samples},         {"shards", r.shards},
          {"linked", r.linked},           {"copied", r.copied},
          {"image_bytes", r.image_bytes}, {"annotation_bytes", r.annotation_bytes},
          {"seconds", r.seconds},         {"warnings", r.warnings}};
      print_json(j);
    } else if (g.verbosity >= 0) {
      std::printf(
          "merged %zu part(s) into %s in %.1f s: %llu samples, %llu shard(s) (%llu linked, %llu "
          "copied), "
          "%s of images; %s %s\n",
          o->parts.size(), o->output.c_str(), r.seconds, static_cast<unsigned long long>(r.samples),
          static_cast<unsigned long long>(r.shards), static_cast<unsigned long long>(r.linked),
          static_cast<unsigned long long>(r.copied), format_bytes(r.image_bytes).c_str(),
          format::kLabelsFile, format_bytes(r.annotation_bytes).c_str());
    }
    return kOk;
  };
}

}  // namespace tarmac::cli
