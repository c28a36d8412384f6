#include "columns/column_parts.h"

#include "common/error.h"
#include "format/column_file.h"
#include "format/layout.h"
#include "format/names.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"
#include "write/manifest_file.h"

namespace tarmac {
namespace fs = std::filesystem;

DatasetIdentity dataset_identity(const fs::path& dir) {
  const fs::path labels = dir / format::kLabelsFile;
  if (!fs::exists(labels))
    throw FatalError("'" + dir.string() + "' holds no dataset (no " + format::kLabelsFile + ")");
  const MappedFile file(labels.string());
  const SafetensorsHeader header = parse_safetensors(file.bytes());
  const DatasetLayout layout = read_layout(header);
  DatasetIdentity id;
  id.num_samples = layout.num_samples;
  for (const FieldLayout& f : layout.fields) id.field_names.push_back(f.spec.name);
  id.labels_crc32 = crc32_hex(file_crc32(labels.string()));
  return id;
}

std::string ranges_text(const std::vector<uint64_t>& indices, size_t most) {
  std::string out;
  size_t shown = 0, runs = 0;
  for (size_t k = 0; k < indices.size();) {
    size_t e = k;
    while (e + 1 < indices.size() && indices[e + 1] == indices[e] + 1) ++e;
    if (shown < most) {
      out += (shown ? ", " : "") + std::to_string(indices[k]) + ".." + std::to_string(indices[e]);
      ++shown;
    }
    ++runs;
    k = e + 1;
  }
  if (runs > shown) out += " and " + std::to_string(runs - shown) + " more ranges";
  return out;
}

}  // namespace tarmac
