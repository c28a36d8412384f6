// tarmac info: a readable (or --json) summary of a converted dataset.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "columns/column_ops.h"
#include "format/json_object.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/table_metadata.h"

#include "apps/commands.h"
#include "apps/errors.h"
#include "check/dataset_source.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/printable.h"
#include "read/dataset_summary.h"

namespace tarmac::cli {

namespace {

constexpr size_t kMaxSizesListed = 1000;  // in --json; the count of distinct sizes is exact
constexpr size_t kMaxClassesShown = 20;   // in the text; --json lists them all

// "3: cat (0), dog (1), eel (2)"; the first kMaxClassesShown, then how many more.
// "coco; metadata: categories (1: person, 17 keypoints, skeleton of 19 links), info".
std::string table_text(const std::string& table_json) {
  const format::TableMetadata t = format::parse_table_metadata(table_json);
  if (!t.readable) return "(unreadable)";
  std::string out = t.format;
  if (t.metadata.empty()) return out;
  out += "; metadata:";
  bool first = true;
  for (const auto& [k, v] : t.metadata.items()) {
    out += (first ? " " : ", ") + k;
    first = false;
    if (k != "categories" || !v.is_array()) continue;
    out += " (" + std::to_string(t.categories.size()) + ":";
    for (size_t i = 0; i < t.categories.size() && i < 4; ++i) {
      const format::TableCategory& c = t.categories[i];
      out += (i ? ", " : " ") + c.name;
      if (c.keypoints) out += " with " + std::to_string(c.keypoints) + " keypoints";
      if (c.links) out += ", a skeleton of " + std::to_string(c.links) + " links";
    }
    out += t.categories.size() > 4 ? ", ...)" : ")";
  }
  return out + " (--json shows it)";
}

std::string classes_text(const std::vector<std::string>& classes) {
  std::string out = std::to_string(classes.size()) + ":";
  for (size_t i = 0; i < classes.size() && i < kMaxClassesShown; ++i)
    out += (i ? ", " : " ") + classes[i] + " (" + std::to_string(i) + ")";
  if (classes.size() > kMaxClassesShown)
    out +=
        ", and " + std::to_string(classes.size() - kMaxClassesShown) + " more (--json lists all)";
  return out;
}

}  // namespace

std::string sizes_text(const DatasetSummary& s, size_t most) {
  std::string out;
  for (size_t i = 0; i < s.image_sizes.size() && i < most; ++i) {
    const auto& z = s.image_sizes[i];
    out += (i ? ", " : "") + std::to_string(z.width) + "x" + std::to_string(z.height) + " (" +
           std::to_string(z.samples) + ")";
  }
  if (s.image_sizes.size() > most)
    out += ", and " + std::to_string(s.image_sizes.size() - most) + " more sizes";
  return out;
}

Runner setup_info(CLI::App& app, const GlobalFlags& g) {
  auto dir = std::make_shared<std::string>();
  app.add_option("dataset", *dir,
                 "Dataset directory written by tarmac convert, or s3://bucket/prefix/")
      ->required();
  auto sizes = std::make_shared<bool>(false);
  app.add_flag("--sizes", *sizes,
               "Also count the stored images' sizes (the buckets of --resize bucket); reads two "
               "columns, so it takes time proportional to the samples");
  return [dir, want_sizes = sizes, &g]() -> int {
    DatasetSummary s;
    std::optional<check::DatasetSource> src;
    try {
      src.emplace(*dir);
      s = check::summarize_source(*src, *want_sizes);
    } catch (const ParseError& e) {  // the rest goes to the dispatcher (apps/main.cpp)
      spdlog::error("'{}/{}' is invalid: {}", *dir, format::kLabelsFile, e.what());
      return kDataError;
    }
    if (!s.manifest_error.empty())
      spdlog::warn("'{}/{}' cannot be read: {} (run 'tarmac verify {}')", *dir,
                   format::kManifestFile, s.manifest_error, *dir);
    uint64_t shard_bytes = 0;
    size_t missing = 0;
    for (const auto& sh : s.shards) {
      shard_bytes += sh.size;
      missing += !sh.present;
    }
    const auto schema = format::parse_ordered(s.schema_json, false);
    std::vector<ColumnInfo> columns;
    try {
      columns = list_columns(src->dir());
    } catch (const std::exception& e) {
      spdlog::warn("cannot list the derived columns: {}", e.what());
    }
    if (g.json) {
      nlohmann::ordered_json j;
      j["path"] = s.path;
      j["format"] = s.format;
      j["samples"] = s.samples;
      j["annotation_bytes"] = s.annotation_bytes;
      j["shard_bytes"] = shard_bytes;
      j["blobs"] = s.blobs;
      j["schema"] = schema;
      if (s.classes) j["classes"] = *s.classes;
      if (!s.table_json.empty()) j["table"] = format::parse_ordered(s.table_json, false);
      nlohmann::ordered_json shards = nlohmann::ordered_json::array();
      for (const auto& sh : s.shards)
        shards.push_back({{"name", sh.name}, {"size", sh.size}, {"present", sh.present}});
      j["shards"] = shards;
      nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
      for (const auto& t : s.tensors)
        tensors.push_back(
            {{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"bytes", t.bytes}});
      j["tensors"] = tensors;
      nlohmann::ordered_json sizes = nlohmann::ordered_json::array();
      for (size_t i = 0; i < s.image_sizes.size() && i < kMaxSizesListed; ++i)
        sizes.push_back({{"width", s.image_sizes[i].width},
                         {"height", s.image_sizes[i].height},
                         {"samples", s.image_sizes[i].samples}});
      if (*want_sizes) {
        j["image_sizes"] = sizes;
        j["distinct_image_sizes"] = s.image_sizes.size();
      }
      if (s.counts) j["counts"] = format::counts_json(*s.counts);
      j["columns"] = columns_json(columns);
      print_json(j);
    } else {
      std::printf("%s: %s dataset, %llu samples\n", s.path.c_str(), s.format.c_str(),
                  static_cast<unsigned long long>(s.samples));
      std::printf("  %-18s  %s, %zu tensors\n", format::kLabelsFile,
                  format_bytes(s.annotation_bytes).c_str(), s.tensors.size());
      std::printf("  shards              %zu file(s), %s", s.shards.size(),
                  format_bytes(shard_bytes).c_str());
      if (missing) std::printf("  (%zu MISSING)", missing);
      std::printf("\n  stored blobs        ");
      for (const auto& b : s.blobs) std::printf("%s ", printable(b).c_str());
      if (!s.image_sizes.empty()) std::printf("\n  image sizes         %s", sizes_text(s).c_str());
      if (s.classes)
        std::printf("\n  classes             %s", printable(classes_text(*s.classes)).c_str());
      if (!s.table_json.empty())
        std::printf("\n  table               %s", printable(table_text(s.table_json)).c_str());
      std::printf("\n  fields:\n");
      if (schema.is_object())
        for (const auto& [name, f] : schema.items())
          std::printf("    %-24s %-8s %-5s %-12s%s  from .%s\n", printable(name).c_str(),
                      f.value("kind", "").c_str(), f.value("dtype", "").c_str(),
                      f["shape"].dump().c_str(), f.value("ragged", false) ? " ragged" : "",
                      printable(f.value("source", "")).c_str());
      if (!columns.empty()) std::printf("  derived columns (tarmac column ls):\n");
      for (const ColumnInfo& c : columns)
        std::printf(
            "    %-24s %s\n", printable(c.name).c_str(),
            printable(c.merged && c.problem.empty()
                          ? c.dtype + " " + c.shape + ", " + format_bytes(c.bytes) + ", fn " + c.fn
                          : c.problem)
                .c_str());
    }
    return missing ? kDataError : kOk;
  };
}

}  // namespace tarmac::cli
