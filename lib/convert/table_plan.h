#pragma once
// What a conversion does with an annotation table (convert --table): which members each row
// needs and which rows share them. Rows naming the same members (the same image, and for a
// split list the same dense maps) form one group: the group's members are read once, the image
// decoded once, and each row becomes its own output sample, `<image key>/<row>`, in row order.
// Groups are released to the workers as soon as their last member has been read, so memory
// holds only members whose partners have not come yet (bounded by the group window), whatever
// the table's row order.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "labels/schema.h"
#include "source/member.h"
#include "table/table.h"

namespace tarmac {

struct TableGroup {
  /// Member paths, normalised: the image first, then each dense column's (--dense order).
  std::vector<std::string> paths;
  std::vector<uint64_t> rows;  ///< ascending
  std::string key;             ///< the image path without its extension
};

/// The path a table names, as the inputs name members: `prefix` put in front, leading "./"
/// dropped from both, repeated slashes folded.
std::string table_member_path(const std::string& prefix, const std::string& path);

class TablePlan {
 public:
  /// `dense`: the member columns kept as dense maps (--dense, by column name). Throws
  /// FatalError for a dense name that is no member column, or a row without an image path.
  TablePlan(Table table, const std::string& prefix, const std::vector<std::string>& dense);

  const Table& table() const { return table_; }
  const std::vector<TableGroup>& groups() const { return groups_; }
  /// The (group, slot) pairs that need member `path`, or null when no row names it.
  const std::vector<std::pair<uint32_t, uint32_t>>* slots(const std::string& path) const {
    auto it = by_path_.find(path);
    return it == by_path_.end() ? nullptr : &it->second;
  }
  /// The label fields of a row (every label column, and `__row__`), for messages named after
  /// the table and row.
  std::vector<SampleField> row_fields(uint64_t row) const;
  /// The output key of a row of group `g`.
  std::string row_key(const TableGroup& g, uint64_t row) const {
    return g.key + "/" + std::to_string(row);
  }
  /// What the manifest records of the table: path, format, rows, groups, checksum, ignored.
  nlohmann::ordered_json manifest_entry() const;

 private:
  Table table_;
  std::vector<TableGroup> groups_;
  std::unordered_map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> by_path_;
};

}  // namespace tarmac
