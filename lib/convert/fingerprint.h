#pragma once
// What shapes a conversion's output, typed: what --resume and merge compare, whoever filled
// ConvertOptions (the CLI or a library caller).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/convert_options.h"

namespace tarmac {

struct Table;

/// Every option that shapes the output, typed, under the name of its flag ("--size": [w, h]):
/// what resume and merge compare, whoever fills ConvertOptions (the CLI or a library caller).
/// Leaves out what does not change the output: -j, --overwrite, --resume, --checkpoint-every,
/// -o, the inputs and --shard (compared on their own).
nlohmann::ordered_json output_options(const ConvertOptions& o);

/// What must not change between an interrupted run and its --resume: output_options, the
/// part, each input file's size and modification time, and the table's (`table`, the one read:
/// an s3://, http(s):// or pipe: table, which has no modification time, by its size and
/// CRC-32).
nlohmann::ordered_json run_fingerprint(const ConvertOptions& o,
                                       const std::vector<std::string>& inputs,
                                       const Table* table = nullptr);

}  // namespace tarmac
