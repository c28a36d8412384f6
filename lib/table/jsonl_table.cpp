// JSON Lines tables: each non-blank line one JSON object, one row. Values are typed by the
// JSON label parser (lib/labels/json_labels), so a table row and a per-sample .json member
// give the same fields.
#include <string>
#include <unordered_map>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "labels/json_labels.h"
#include "table/table_formats.h"
#include "table/table_internal.h"

namespace tarmac {

Table load_jsonl_table(const std::string& path, std::span<const uint8_t> bytes,
                       const TableOptions& options) {
  std::vector<std::string> names;
  std::unordered_map<std::string, size_t> index;
  std::vector<std::vector<FieldValue>> columns;
  uint64_t rows = 0;
  uint64_t line_number = 0;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = start;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    ++line_number;
    const std::span<const uint8_t> line = bytes.subspan(start, end - start);
    start = end + 1;
    size_t first = 0;
    while (first < line.size() &&
           (line[first] == ' ' || line[first] == '\t' || line[first] == '\r'))
      ++first;
    if (first == line.size()) continue;
    const std::string where = "table " + path + ", line " + std::to_string(line_number);
    if (line.size() > options.max_cell_bytes)
      throw FatalError(where + " (row " + std::to_string(rows) + "): a line of " +
                       format_bytes(line.size()) + ", over --max-label-size " +
                       format_bytes(options.max_cell_bytes) +
                       " (a JSON row is parsed whole, at ~25-40x its size); raise "
                       "--max-label-size to read it");
    if (line[first] != '{')
      throw FatalError(where + ": not a JSON object; a JSON Lines table holds one object per line");
    Fields fields;
    try {
      fields = parse_json_labels(line, "", "");
    } catch (const ParseError& e) {
      throw FatalError(where + ": " + e.what());
    }
    for (auto& [name, value] : fields) {
      auto [it, added] = index.try_emplace(name, names.size());
      if (added) {
        names.push_back(name);
        columns.emplace_back(rows, detail::null_value());  // earlier rows had none
      }
      columns[it->second].push_back(std::move(value));
    }
    ++rows;
    for (std::vector<FieldValue>& column : columns)
      if (column.size() < rows) column.push_back(detail::null_value());
  }

  Table table;
  table.rows = rows;
  for (size_t c = 0; c < names.size(); ++c)
    table.columns.push_back(detail::make_column(names[c], std::move(columns[c])));
  if (rows > 0) detail::take_image_column(table, path, options.image_column, "image_path");
  return table;
}

}  // namespace tarmac
