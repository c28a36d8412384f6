// CSV tables (RFC 4180): a header row names the columns; fields may be quoted, with "" for a
// quote inside, and hold commas and line breaks there; lines end in LF or CRLF. Cells are
// typed per column: all integers -> I64, all numbers -> F64, empty -> null, anything else
// makes the whole column String (as written).
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "common/utf8.h"
#include "table/table_formats.h"
#include "table/table_internal.h"

namespace tarmac {

namespace {

struct Cell {
  std::string text;
  bool quoted = false;
};

// Splits the text into records of cells; `lines` gets each record's first line number.
class CsvParser {
 public:
  CsvParser(const std::string& path, std::string_view text, uint64_t max_cell)
      : path_(path), text_(text), max_cell_(max_cell) {}

  /// The header's names, for naming a cell's column in a refusal.
  void set_names(const std::vector<std::string>* names) { names_ = names; }

  /// The next record; false at the end. Blank lines are skipped.
  bool next(std::vector<Cell>& record, uint64_t& line) {
    record.clear();
    while (pos_ < text_.size() && (text_[pos_] == '\n' || text_.substr(pos_, 2) == "\r\n")) {
      pos_ += text_[pos_] == '\n' ? 1 : 2;
      ++line_;
    }
    if (pos_ >= text_.size()) return false;
    line = line_;
    for (;;) {
      Cell cell;
      if (pos_ < text_.size() && text_[pos_] == '"') {
        cell.quoted = true;
        const uint64_t opened = line_;
        ++pos_;
        for (;;) {
          if (pos_ >= text_.size())
            throw FatalError(where(opened) +
                             ": a quoted field is not closed before the end of "
                             "the file (a '\"' is missing)");
          const char c = text_[pos_++];
          if (c == '"') {
            if (pos_ < text_.size() && text_[pos_] == '"') {
              cell.text += '"';
              ++pos_;
              continue;
            }
            break;
          }
          if (c == '\n') ++line_;
          cell.text += c;
          if (cell.text.size() > max_cell_)
            too_large(record.size(), opened, cell.text.size() + quoted_size(pos_));
        }
        if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' &&
            text_.substr(pos_, 2) != "\r\n")
          throw FatalError(where(line_) +
                           ": text after a closing quote; inside a quoted field write a quote "
                           "as \"\"");
      } else {
        const size_t start = pos_;
        while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' &&
               text_.substr(pos_, 2) != "\r\n") {
          if (text_[pos_] == '"')
            throw FatalError(where(line_) +
                             ": a '\"' inside an unquoted field; quote the whole field and "
                             "write the quote as \"\"");
          ++pos_;
        }
        if (pos_ - start > max_cell_) too_large(record.size(), line_, pos_ - start);
        cell.text = std::string(text_.substr(start, pos_ - start));
      }
      record.push_back(std::move(cell));
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size()) {  // the line break
        pos_ += text_[pos_] == '\n' ? 1 : 2;
        ++line_;
      }
      ++records_;
      return true;
    }
  }

  std::string where(uint64_t line) const {
    return "table " + path_ + ", line " + std::to_string(line);
  }

 private:
  // The whole length of a quoted field whose text goes on at `from` (a "" counts as one).
  uint64_t quoted_size(size_t from) const {
    uint64_t n = 0;
    for (size_t p = from; p < text_.size(); ++p, ++n) {
      if (text_[p] != '"') continue;
      if (p + 1 < text_.size() && text_[p + 1] == '"')
        ++p;
      else
        break;
    }
    return n;
  }

  // A cell over the limit is refused before it is copied any further: a 1 GB cell cost 4 GB.
  [[noreturn]] void too_large(size_t column, uint64_t line, uint64_t size) const {
    std::string where_cell = where(line);
    where_cell += records_ > 0 ? " (row " + std::to_string(records_ - 1) + ")" : " (the header)";
    if (names_ && column < names_->size())
      where_cell += ", column '" + (*names_)[column] + "'";
    else
      where_cell += ", column " + std::to_string(column + 1);
    throw FatalError(where_cell + ": a cell of " + format_bytes(size) + ", over --max-label-size " +
                     format_bytes(max_cell_) +
                     " (a table is read whole into memory); raise --max-label-size to read it");
  }

  const std::string& path_;
  std::string_view text_;
  uint64_t max_cell_;
  const std::vector<std::string>* names_ = nullptr;
  size_t pos_ = 0;
  uint64_t line_ = 1;
  uint64_t records_ = 0;  ///< records returned, the header's included
};

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int64_t& out) {
  s = trimmed(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

bool parse_float(std::string_view s, double& out) {
  s = trimmed(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

TableColumn typed_column(std::string name, const std::vector<std::string>& cells) {
  bool all_int = true, all_number = true;
  for (const std::string& c : cells) {
    if (c.empty()) continue;
    int64_t i = 0;
    double d = 0;
    if (parse_int(c, i)) continue;
    all_int = false;
    if (parse_float(c, d)) continue;
    all_number = false;
    break;
  }
  detail::ColumnBuilder column(std::move(name));
  for (const std::string& c : cells) {
    if (c.empty()) {
      column.add(detail::null_value());
    } else if (all_int) {
      int64_t i = 0;
      parse_int(c, i);
      column.add_numeric(DType::I64, {}, &i, sizeof i);
    } else if (all_number) {
      double d = 0;
      parse_float(c, d);
      column.add_numeric(DType::F64, {}, &d, sizeof d);
    } else {
      column.add(detail::string_value(c));
    }
  }
  return std::move(column).finish();
}

}  // namespace

Table load_csv_table(const std::string& path, std::span<const uint8_t> bytes,
                     const TableOptions& options) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // the BOM spreadsheets write
  if (!is_valid_utf8(text))
    throw FatalError("table " + path +
                     ": not valid UTF-8, so not a CSV table tarmac reads "
                     "(save it as UTF-8)");
  CsvParser parser(path, text, options.max_cell_bytes);
  std::vector<Cell> record;
  uint64_t line = 0;
  if (!parser.next(record, line)) return Table{};
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  for (size_t c = 0; c < record.size(); ++c) {
    if (record[c].text.empty())
      throw FatalError(parser.where(line) + ": the header's column " + std::to_string(c + 1) +
                       " has no name");
    if (!seen.insert(record[c].text).second)
      throw FatalError(parser.where(line) + ": the header names the column '" + record[c].text +
                       "' twice");
    names.push_back(record[c].text);
  }
  parser.set_names(&names);
  std::vector<std::vector<std::string>> cells(names.size());
  uint64_t rows = 0;
  while (parser.next(record, line)) {
    if (record.size() != names.size())
      throw FatalError(parser.where(line) + ": " + std::to_string(record.size()) +
                       " cells, where the header has " + std::to_string(names.size()) + " columns");
    for (size_t c = 0; c < names.size(); ++c) cells[c].push_back(std::move(record[c].text));
    ++rows;
  }

  Table table;
  table.rows = rows;
  if (rows == 0) return table;
  const std::string image = options.image_column.empty() ? "image_path" : options.image_column;
  for (size_t c = 0; c < names.size(); ++c) {
    if (names[c] == image) {
      // Paths stay text even when they look like numbers ("000123").
      std::vector<FieldValue> values;
      values.reserve(rows);
      for (const std::string& cell : cells[c])
        values.push_back(cell.empty() ? detail::null_value() : detail::string_value(cell));
      table.columns.push_back(detail::make_column(names[c], std::move(values)));
    } else {
      table.columns.push_back(typed_column(names[c], cells[c]));
    }
    std::vector<std::string>().swap(cells[c]);
  }
  detail::take_image_column(table, path, options.image_column, "image_path");
  return table;
}

}  // namespace tarmac
