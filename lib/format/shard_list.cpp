#include "format/shard_list.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tarmac::format {
using json = nlohmann::ordered_json;

std::string shard_list_text(const ShardList& list) {
  json shards = json::array();
  for (const auto& s : list.shards)
    shards.push_back({{"url", s.url}, {"nsamples", s.nsamples}, {"filesize", s.filesize}});
  json doc = {{"__kind__", kShardListKind}, {"wids_version", 1}};
  if (!list.name.empty()) doc["name"] = list.name;
  doc["shardlist"] = std::move(shards);
  return doc.dump(1) + "\n";
}

ShardList parse_shard_list(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) throw ParseError("is not a JSON object");
  if (doc.value("__kind__", json()) != json(kShardListKind))
    throw ParseError("its \"__kind__\" is not \"" + std::string(kShardListKind) + "\"");
  if (doc.value("wids_version", json()) != json(1))
    throw ParseError("its \"wids_version\" is not 1");
  ShardList out;
  if (doc.contains("name") && doc["name"].is_string()) out.name = doc["name"].get<std::string>();
  const auto it = doc.find("shardlist");
  if (it == doc.end() || !it->is_array()) throw ParseError("has no \"shardlist\" array");
  for (size_t k = 0; k < it->size(); ++k) {
    const json& e = (*it)[k];
    const std::string where = "shardlist entry " + std::to_string(k);
    if (!e.is_object() || !e.contains("url") || !e["url"].is_string())
      throw ParseError(where + " has no \"url\" string");
    if (!e.contains("nsamples") || !e["nsamples"].is_number_unsigned())
      throw ParseError(where + " has no unsigned \"nsamples\"");
    ShardListEntry s{e["url"].get<std::string>(), e["nsamples"].get<uint64_t>(), 0};
    if (e.contains("filesize")) {
      if (!e["filesize"].is_number_unsigned())
        throw ParseError(where + "'s \"filesize\" is not an unsigned number");
      s.filesize = e["filesize"].get<uint64_t>();
    }
    out.shards.push_back(std::move(s));
  }
  return out;
}

}  // namespace tarmac::format
