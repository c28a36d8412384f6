#pragma once
// The annotation file's `table` metadata (docs/format.md 2): what a `convert --table` table
// says beyond its rows (COCO's categories with their keypoint names and skeleton, npz's 0-d
// members), as {"format": NAME, "metadata": {...}}. One writer (table_metadata_text, convert's)
// and one reader (parse_table_metadata: info and preview).
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tarmac::format {

/// The largest joint number a skeleton link may name (a pair beyond it is not drawn).
inline constexpr int kMaxSkeletonJoint = 10000;

struct TableCategory {
  std::string name;      ///< "?" when it has none
  size_t keypoints = 0;  ///< the names in its `keypoints` list
  size_t links = 0;      ///< the entries of its `skeleton` list
  /// Its skeleton's links that are pairs of joint numbers in [1, kMaxSkeletonJoint] (1-based).
  std::vector<std::pair<int, int>> skeleton;
};

struct TableMetadata {
  bool readable = false;  ///< the text is such an object
  std::string format;     ///< "coco", "npz", ... ("?" when it says none)
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();  ///< the table's own
  std::vector<TableCategory> categories;  ///< COCO's `categories`, in order
};

/// The text convert stores: `format` (table_format_name) and the table's metadata.
std::string table_metadata_text(std::string_view format, const nlohmann::ordered_json& metadata);

/// Reads the stored text; never throws (a text that is no such object: readable false, the
/// rest empty; parts of another shape are left out).
TableMetadata parse_table_metadata(std::string_view text);

}  // namespace tarmac::format
