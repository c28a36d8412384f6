#include "convert/table_plan.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "format/names.h"
#include "write/manifest_file.h"

namespace tarmac {
using json = nlohmann::ordered_json;

std::string table_member_path(const std::string& prefix, const std::string& path) {
  auto strip = [](std::string s) {
    while (s.rfind("./", 0) == 0) s.erase(0, 2);
    return s;
  };
  std::string p = strip(prefix), rest = strip(path);
  if (!p.empty() && p.back() != '/' && !rest.empty()) p += '/';
  std::string joined = p + rest, out;
  out.reserve(joined.size());
  for (char c : joined)
    if (c != '/' || out.empty() || out.back() != '/') out += c;
  return strip(out);
}

namespace {

// "images/train/a.png" -> "images/train/a" (the last extension of the file name goes).
std::string path_key(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1))
    return path;
  return path.substr(0, dot);
}

}  // namespace

TablePlan::TablePlan(Table table, const std::string& prefix, const std::vector<std::string>& dense)
    : table_(std::move(table)) {
  const auto& cols = table_.member_columns;
  if (cols.empty() || table_.member_paths.size() != cols.size())
    throw FatalError("table '" + table_.path + "' has no image column");
  std::vector<size_t> slot_cols = {0};
  for (const auto& d : dense) {
    const auto it = std::find(cols.begin(), cols.end(), d);
    if (it == cols.end() || it == cols.begin()) {
      std::string have;
      for (size_t c = 1; c < cols.size(); ++c) have += (have.empty() ? "'" : ", '") + cols[c] + "'";
      throw FatalError("--dense " + d + ": table '" + table_.path +
                       "' has no member column of that name (with --table, --dense names a "
                       "column of paths; " +
                       (have.empty() ? std::string("this table has none besides the image")
                                     : "its others are " + have) +
                       ")");
    }
    slot_cols.push_back(static_cast<size_t>(it - cols.begin()));
  }
  // Rows naming the same members are one group, numbered in order of their first row.
  // Keyed by the paths joined with '\0' (which no path holds).
  std::unordered_map<std::string, uint32_t> index;
  index.reserve(static_cast<size_t>(table_.rows));
  std::string joined;
  for (uint64_t row = 0; row < table_.rows; ++row) {
    std::vector<std::string> paths;
    for (size_t c : slot_cols) {
      const std::string& raw = table_.member_paths[c][row];
      std::string p = table_member_path(prefix, raw);
      if (p.empty())
        throw FatalError("table '" + table_.path + "', row " + std::to_string(row) + ": column '" +
                         cols[c] + "' holds no path");
      paths.push_back(std::move(p));
    }
    joined.clear();
    for (const auto& p : paths) (joined += p) += '\0';
    auto [it, fresh] = index.try_emplace(joined, static_cast<uint32_t>(groups_.size()));
    if (fresh) {
      TableGroup g;
      g.key = path_key(paths.front());
      g.paths = std::move(paths);
      groups_.push_back(std::move(g));
    }
    groups_[it->second].rows.push_back(row);
  }
  by_path_.reserve(groups_.size() * slot_cols.size());
  for (uint32_t g = 0; g < groups_.size(); ++g)
    for (uint32_t s = 0; s < groups_[g].paths.size(); ++s)
      by_path_[groups_[g].paths[s]].emplace_back(g, s);
}

std::vector<SampleField> TablePlan::row_fields(uint64_t row) const {
  std::vector<SampleField> out;
  out.reserve(table_.columns.size() + 1);
  const std::string where = table_.path + " row " + std::to_string(row);
  for (const TableColumn& c : table_.columns) out.push_back({c.name, where, "table", c.value(row)});
  FieldValue r;
  r.dtype = DType::I64;
  const auto v = static_cast<int64_t>(row);
  r.data.resize(sizeof v);
  std::memcpy(r.data.data(), &v, sizeof v);
  out.push_back({format::kRowField, where, "table", std::move(r)});
  return out;
}

json TablePlan::manifest_entry() const {
  json j = {{"path", table_.path},
            {"format", table_format_name(table_.format)},
            {"bytes", table_.bytes},
            {"crc32", crc32_hex(table_.crc32)},
            {"rows", table_.rows},
            {"images", groups_.size()},
            {"member_columns", table_.member_columns}};
  if (!table_.ignored.empty()) {
    std::vector<std::string> reasons;
    for (const auto& i : table_.ignored) reasons.push_back(i.reason);
    j["ignored"] = reasons;
  }
  return j;
}

}  // namespace tarmac
