#include "read/dataset_summary.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "read/mapped_file.h"
#include "read/safetensors_file.h"

namespace tarmac {
namespace fs = std::filesystem;

namespace {

// Counts the (width, height) pairs of the stored images: one pass over two I32 columns.
std::vector<DatasetSummary::ImageSize> image_size_histogram(const SafetensorsHeader& h,
                                                            std::span<const uint8_t> file,
                                                            uint64_t samples) {
  const TensorInfo* w = h.find("__image__.width");
  const TensorInfo* ht = h.find("__image__.height");
  if (w == nullptr || ht == nullptr) return {};
  auto column = [&](const TensorInfo* t) {
    if (t->dtype != DType::I32 || t->end - t->begin != samples * 4 || t->end > file.size())
      throw ParseError("'" + t->name + "' is not an I32 column of num_samples values");
    return file.data() + t->begin;
  };
  const uint8_t* wp = column(w);
  const uint8_t* hp = column(ht);
  std::map<std::pair<int32_t, int32_t>, uint64_t> count;
  for (uint64_t i = 0; i < samples; ++i) {
    int32_t a, b;  // little-endian in the file, as on every machine tarmac builds for
    std::memcpy(&a, wp + i * 4, 4);
    std::memcpy(&b, hp + i * 4, 4);
    ++count[{a, b}];
  }
  std::vector<DatasetSummary::ImageSize> out;
  out.reserve(count.size());
  for (const auto& [size, n] : count) out.push_back({size.first, size.second, n});
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return x.samples > y.samples; });
  return out;
}

}  // namespace

DatasetSummary summarize_dataset(const std::string& dir, bool image_sizes) {
  DatasetSummary s;
  s.path = dir;
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw FatalError("'" + dir + "' is not a directory");
  const fs::path labels = root / "labels.safetensors";
  if (!fs::exists(labels, ec)) {
    std::string hint =
        fs::exists(root / ".tarmac-partial", ec) ? " (a conversion into it did not finish)" : "";
    throw FatalError("'" + dir + "' is not a tarmac dataset: no labels.safetensors" + hint);
  }
  MappedFile file(labels.string());
  const SafetensorsHeader h = parse_safetensors(file.bytes());
  s.annotation_bytes = file.bytes().size();
  auto meta = [&](const char* k) -> std::string {
    auto it = h.metadata.find(k);
    if (it == h.metadata.end())
      throw ParseError(std::string("annotation file has no '") + k + "' metadata entry");
    return it->second;
  };
  s.format = meta("format");
  if (s.format != "tarmac/1")
    throw ParseError("annotation file format is '" + s.format + "', expected 'tarmac/1'");
  try {
    s.samples = std::stoull(meta("num_samples"));
  } catch (const std::logic_error&) {
    throw ParseError("num_samples metadata is not a number");
  }
  s.schema_json = meta("schema");
  try {
    for (const auto& name : nlohmann::json::parse(meta("shards"))) {
      DatasetSummary::Shard sh;
      sh.name = name.get<std::string>();
      sh.present = fs::is_regular_file(root / sh.name, ec);
      if (sh.present) sh.size = fs::file_size(root / sh.name, ec);
      s.shards.push_back(sh);
    }
    if (auto it = h.metadata.find("blobs"); it != h.metadata.end())
      for (const auto& b : nlohmann::json::parse(it->second))
        s.blobs.push_back(b.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw ParseError(std::string("invalid metadata: ") + e.what());
  }
  for (const auto& t : h.tensors)
    s.tensors.push_back({t.name, std::string(dtype_name(t.dtype)), t.shape, t.end - t.begin});
  if (image_sizes) s.image_sizes = image_size_histogram(h, file.bytes(), s.samples);
  std::ifstream m(root / "manifest.json");
  if (m) {
    std::stringstream ss;
    ss << m.rdbuf();
    s.manifest_json = ss.str();
  }
  return s;
}

}  // namespace tarmac
