// Split lists (Marigold's filename_list_train.txt): each line names the files of one sample,
// separated by whitespace; every column is a member column.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "table/table_formats.h"
#include "table/table_internal.h"

namespace tarmac {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

}  // namespace

Table load_list_table(const std::string& path, std::span<const uint8_t> bytes,
                      const TableOptions& options) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!is_valid_utf8(text))
    throw FatalError("table " + path +
                     ": not valid UTF-8 text, so not a split list (name the "
                     "format with --table-format)");
  Table table;
  uint64_t line_number = 0;
  uint64_t first_line = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++line_number;
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    // A comment: a line whose first word starts with '#'; paths may hold '#' elsewhere.
    const std::vector<std::string_view> words = split_words(line);
    if (words.empty() || words.front().front() == '#') continue;
    if (table.member_paths.empty()) {
      first_line = line_number;
      table.member_paths.resize(words.size());
    } else if (words.size() != table.member_paths.size()) {
      throw FatalError("table " + path + ", line " + std::to_string(line_number) + ": " +
                       std::to_string(words.size()) + " paths, where line " +
                       std::to_string(first_line) + " has " +
                       std::to_string(table.member_paths.size()) +
                       "; every line of a split list names the same number of files");
    }
    for (size_t c = 0; c < words.size(); ++c) table.member_paths[c].emplace_back(words[c]);
    ++table.rows;
  }
  if (table.rows == 0) return table;

  const size_t n = table.member_paths.size();
  if (options.list_columns.empty()) {
    table.member_columns.push_back("image");
    for (size_t c = 1; c < n; ++c) table.member_columns.push_back("path" + std::to_string(c));
  } else {
    if (options.list_columns.size() != n)
      throw FatalError("table " + path + ": its lines name " + std::to_string(n) +
                       " paths each, but --table-columns names " +
                       std::to_string(options.list_columns.size()) + " (" +
                       detail::quoted_list(options.list_columns) + ")");
    table.member_columns = options.list_columns;
    for (size_t c = 0; c < n; ++c)
      for (size_t d = 0; d < c; ++d)
        if (table.member_columns[c] == table.member_columns[d])
          throw FatalError("table " + path + ": --table-columns names '" + table.member_columns[c] +
                           "' twice");
  }
  const std::string image = options.image_column.empty() ? "image" : options.image_column;
  const auto it = std::find(table.member_columns.begin(), table.member_columns.end(), image);
  if (it == table.member_columns.end())
    throw FatalError("table " + path + ": no image column '" + image + "'; its columns are " +
                     detail::quoted_list(table.member_columns) +
                     " (name them with --table-columns, the image column with --table-image)");
  const size_t image_index = static_cast<size_t>(it - table.member_columns.begin());
  if (image_index != 0) {
    std::rotate(table.member_columns.begin(), it, it + 1);
    std::rotate(table.member_paths.begin(),
                table.member_paths.begin() + static_cast<std::ptrdiff_t>(image_index),
                table.member_paths.begin() + static_cast<std::ptrdiff_t>(image_index) + 1);
  }
  return table;
}

}  // namespace tarmac
