#pragma once
// What a finished conversion reports: which stage held it back (and what to do about it), and
// the result as the JSON document `tarmac convert --json` prints (docs/cli.md, "Summary").
#include <nlohmann/json.hpp>
#include <string>

#include "convert/convert.h"

namespace tarmac {

/// The stage that held a run back, from its busy fractions (StageTimes).
enum class StageLimit { None, Workers, Window, Reader, Writer };

/// The stage at 85 % busy or more that limits the run; None when none stands out (as in a run
/// too short to fill the pipeline): a user's answer to "would more threads help?".
StageLimit stage_limit(const StageTimes& st);

/// "workers", "window", "reader", "writer" or "" (None): the `limit` of the JSON summary.
const char* stage_limit_name(StageLimit limit);

/// One sentence, "the limit: ...", saying what limits the run of `st` and what would help;
/// "" when no stage stands out.
std::string stage_advice(const StageTimes& st);

/// Samples this run converted per second: a resumed run's earlier samples are not counted.
double samples_per_second(const ConvertResult& r);

/// What to change when every sample was skipped for the same fixable reason (no image member:
/// "pass --no-images"); "" otherwise.
std::string skip_advice(const ConvertResult& r);

/// Why a run converted no sample, from its counts and the `members` its inputs held: "the input
/// holds no member (an empty archive or standard input)", "all 3 sample(s) were skipped as bad
/// (the first: ...)", ... For the error that ends such a run unless --allow-empty; the options
/// that can leave a run empty are named: --on-duplicate, --dedup, the part of --shard.
std::string empty_run_reason(const ConvertResult& r, uint64_t members, OnDuplicate on_duplicate,
                             const DedupOptions& dedup, const PartOptions& part);

/// The summary of a conversion into `output`, key for key as `tarmac convert --json` prints it.
nlohmann::ordered_json result_json(const ConvertResult& r, const std::string& output);

}  // namespace tarmac
