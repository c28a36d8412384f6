#include "read/dataset_summary.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "format/layout.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"

namespace tarmac {
namespace fs = std::filesystem;

namespace {

// Counts the (width, height) pairs of the stored images: one pass over two I32 columns.
// The columns are checked by the layout: I32, num_samples values each.
std::vector<DatasetSummary::ImageSize> image_size_histogram(std::span<const uint8_t> file,
                                                            const TensorInfo& w,
                                                            const TensorInfo& ht,
                                                            uint64_t samples) {
  const uint8_t* wp = file.data() + w.begin;
  const uint8_t* hp = file.data() + ht.begin;
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
  const fs::path labels = root / format::kLabelsFile;
  if (!fs::exists(labels, ec)) {
    std::string hint =
        fs::exists(root / format::kStagingDir, ec) ? " (a conversion into it did not finish)" : "";
    throw FatalError("'" + dir + "' is not a tarmac dataset: no " + format::kLabelsFile + hint);
  }
  MappedFile file(labels.string());
  const SafetensorsHeader h = parse_safetensors(file.bytes());
  const DatasetLayout layout = read_layout(h);
  s.annotation_bytes = file.bytes().size();
  s.format = h.metadata.at(format::kMetaFormat);
  s.samples = layout.num_samples;
  s.schema_json = h.metadata.at(format::kMetaSchema);
  for (const auto& name : layout.shards) {
    DatasetSummary::Shard sh;
    sh.name = name;
    sh.present = fs::is_regular_file(root / sh.name, ec);
    if (sh.present) sh.size = fs::file_size(root / sh.name, ec);
    s.shards.push_back(sh);
  }
  for (const auto& b : layout.blobs) s.blobs.push_back(b.kind);
  s.classes = layout.classes;
  if (layout.table) s.table_json = *layout.table;
  for (const auto& t : h.tensors)
    s.tensors.push_back({t.name, std::string(dtype_name(t.dtype)), t.shape, t.end - t.begin});
  if (image_sizes && layout.has_images()) {
    const BlobLayout& image = layout.blobs[0];
    s.image_sizes = image_size_histogram(file.bytes(), *image.columns[format::kBlobWidth],
                                         *image.columns[format::kBlobHeight], s.samples);
  }
  try {
    if (const auto m = format::read_manifest(root)) s.counts = m->counts;
  } catch (const ParseError& e) {
    s.manifest_error = e.what();
  }
  return s;
}

}  // namespace tarmac
