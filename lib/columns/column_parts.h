#pragma once
// What `column merge` binds a derived column's parts to (the dataset's identity), and the
// sample ranges its messages name. The parts' records are format/part_record.h's.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "format/part_record.h"

namespace tarmac {

/// What the dataset in `dir` is, for binding columns to it.
struct DatasetIdentity {
  uint64_t num_samples = 0;
  std::string labels_crc32;  ///< computed from the annotation file's bytes
  std::vector<std::string> field_names;
};
/// Reads the annotation file's header and checksums it; throws FatalError/ParseError.
DatasetIdentity dataset_identity(const std::filesystem::path& dir);

/// "12..40, 77..77 and 3 more ranges": the runs of `indices` (sorted, unique), inclusive.
std::string ranges_text(const std::vector<uint64_t>& indices, size_t most = 4);

}  // namespace tarmac
