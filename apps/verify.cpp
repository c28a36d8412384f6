// tarmac verify: flags -> check::verify_dataset() -> report + exit code (0 only when intact).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/errors.h"
#include "apps/flag_values.h"
#include "apps/progress.h"
#include "apps/signals.h"
#include "check/verify.h"
#include "common/bytes.h"
#include "common/printable.h"

namespace tarmac::cli {

Runner setup_verify(CLI::App& app, const GlobalFlags& g) {
  auto o = std::make_shared<check::VerifyOptions>();
  app.add_option("dataset", o->dir, "Dataset directory to check, or s3://bucket/prefix/")
      ->required();
  app.add_flag("--decode", o->decode, "Also decode every image and dense map and check its size");
  app.add_option("-j,--threads", o->threads,
                 "Threads (default: all cores); shards are checked in parallel")
      ->transform(integer_in(kThreadRange));
  app.add_option("--sample", o->sample,
                 "Spot-check N random samples (their blobs alone, each read with its tar header) "
                 "instead of every byte; default: all")
      ->transform(integer_in({1, int64_t{1} << 62}));
  app.add_option("--seed", o->seed, "Which random samples --sample checks (default 0)")
      ->transform(unsigned_integer());
  app.footer(
      "Checks the annotation file against docs/format.md, every shard as tar (headers, padding,\n"
      "end blocks), every blob's place, name, size and CRC-32, and the sealed manifest (its own\n"
      "CRC-32, the annotation file's and each shard's): any changed byte is found.\n"
      "A dataset in object storage (s3://, http(s)://) is read once, each shard downloaded to\n"
      "TMPDIR, checked and removed (at most -j shards there at a time).\n"
      "Exit 0 only when everything holds; 3 when the dataset is damaged (the problems are\n"
      "listed); 1 when there is no dataset to check or verify could not run.");
  return [o, &g]() -> int {
    const bool bar = g.verbosity >= 0 && !g.json && ::isatty(STDERR_FILENO);
    o->stop = &stop_on_signals();
    check::VerifyReport r;
    try {
      r = check::verify_dataset(*o, [&](const check::VerifyProgress& p) {
        if (bar)
          cli::print_bytes_progress("verify:", p.bytes_done, p.bytes_total, p.seconds, true,
                                    p.final);
      });
    } catch (const Interrupted& e) {
      if (bar) std::fputc('\n', stderr);
      // Never "OK" nor "FAILED": nothing is known of what it did not reach.
      spdlog::error("verify of '{}' {} before it finished: its result is unknown (run it again)",
                    o->dir, e.what());
      return signal_exit_code(e.signal());
    }
    if (g.json) {
      nlohmann::ordered_json j;
      j["dataset"] = r.dir;
      j["ok"] = r.ok();
      j["result"] = r.ok() ? "ok" : r.damaged() ? "damage_found" : "no_dataset";
      j["samples"] = r.samples;
      j["shards"] = r.shards;
      j["blobs"] = r.blobs;
      j["columns"] = r.columns;
      if (r.sampled) j["sampled"] = r.sampled;
      j["bytes_checked"] = r.bytes_checked;
      j["decoded"] = o->decode;
      j["seconds"] = r.seconds;
      j["problem_count"] = r.problem_count;
      auto& list = j["problems"] = nlohmann::ordered_json::array();
      for (const auto& p : r.problems)
        list.push_back({{"file", p.file}, {"sample", p.sample}, {"problem", p.what}});
      print_json(j);
    } else {
      // keys, member and field names in the messages are shown escaped (printable.h)
      for (const auto& p : r.problems)
        std::printf("%s: %s%s\n", printable(p.file).c_str(),
                    p.sample.empty() ? "" : ("sample '" + printable(p.sample) + "': ").c_str(),
                    printable(p.what).c_str());
      if (r.problem_count > r.problems.size())
        std::printf("... and %llu more problem(s)\n",
                    static_cast<unsigned long long>(r.problem_count - r.problems.size()));
      if (g.verbosity >= 0 || !r.ok())
        std::printf(
            "%s %s: %llu samples%s, %llu shard(s), %llu blob(s)%s, %s checked in %.1f s (%s/s)%s\n",
            r.ok() ? "OK" : "FAILED", r.dir.c_str(), static_cast<unsigned long long>(r.samples),
            r.sampled ? (" (" + std::to_string(r.sampled) + " spot-checked, --sample)").c_str()
                      : "",
            static_cast<unsigned long long>(r.shards), static_cast<unsigned long long>(r.blobs),
            r.columns ? (", " + std::to_string(r.columns) + " derived column(s)").c_str() : "",
            format_bytes(r.bytes_checked).c_str(), r.seconds,
            format_bytes(r.seconds > 0 ? static_cast<uint64_t>(r.bytes_checked / r.seconds) : 0)
                .c_str(),
            r.ok() ? "" : (", " + std::to_string(r.problem_count) + " problem(s)").c_str());
    }
    if (!r.ok()) spdlog::error("'{}' failed verification: {} problem(s)", r.dir, r.problem_count);
    return r.ok() ? kOk : r.damaged() ? kDamageFound : kDataError;
  };
}

}  // namespace tarmac::cli
