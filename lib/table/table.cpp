#include "table/table.h"

#include <array>
#include <cstring>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string_view>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "table/table_formats.h"

namespace tarmac {

namespace {

struct FormatName {
  TableFormat format;
  const char* name;
};
constexpr std::array<FormatName, 6> kFormatNames = {{{TableFormat::Auto, "auto"},
                                                     {TableFormat::Coco, "coco"},
                                                     {TableFormat::Npz, "npz"},
                                                     {TableFormat::JsonLines, "jsonl"},
                                                     {TableFormat::Csv, "csv"},
                                                     {TableFormat::List, "list"}}};

std::vector<uint8_t> read_table_file(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw FatalError("table " + path + ": cannot open it (" + std::strerror(errno) + ")");
  const std::streamoff size = in.tellg();
  if (size < 0) throw FatalError("table " + path + ": cannot tell its size");
  if (static_cast<uint64_t>(size) > max_bytes)
    throw FatalError("table " + path + ": " + format_bytes(static_cast<uint64_t>(size)) +
                     ", over the limit of " + format_bytes(max_bytes) +
                     " for a table (--max-table-size raises it)");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw FatalError("table " + path + ": cannot read it to its end");
  return bytes;
}

bool is_space(uint8_t b) {
  return b == ' ' || b == '\t' || b == '\r' || b == '\n';
}

// One flat pass over a JSON text, never recursing: the keys of the top-level object whose
// values are arrays, and how many top-level values there are. Enough to tell a COCO document
// from JSON Lines without parsing 240 MB twice.
struct JsonOutline {
  size_t top_values = 0;
  bool images = false, annotations = false;
};

JsonOutline outline_json(std::span<const uint8_t> bytes) {
  JsonOutline out;
  int depth = 0;
  size_t i = 0;
  std::string_view last_key;
  bool after_colon = false;
  while (i < bytes.size()) {
    const uint8_t b = bytes[i];
    if (b == '"') {
      const size_t start = ++i;
      while (i < bytes.size() && bytes[i] != '"') i += bytes[i] == '\\' ? 2 : 1;
      if (depth == 1 && !after_colon)
        last_key = {reinterpret_cast<const char*>(bytes.data()) + start,
                    std::min(i, bytes.size()) - start};
      after_colon = false;
      ++i;
      continue;
    }
    if (b == ':' && depth == 1) {
      after_colon = true;
    } else if (b == '[' || b == '{') {
      if (depth == 0) ++out.top_values;
      if (depth == 1 && after_colon && b == '[') {
        out.images |= last_key == "images";
        out.annotations |= last_key == "annotations";
      }
      ++depth;
      after_colon = false;
    } else if (b == ']' || b == '}') {
      if (depth > 0) --depth;
    } else if (!is_space(b)) {
      after_colon = false;
    }
    ++i;
  }
  return out;
}

// Sampled: every non-blank line of the first kLinesChecked parses as a JSON object (the
// reader then parses them all, and names a bad line).
bool looks_like_json_lines(std::span<const uint8_t> bytes) {
  constexpr int kLinesChecked = 64;
  int checked = 0;
  size_t start = 0;
  while (start < bytes.size() && checked < kLinesChecked) {
    size_t end = start;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    std::span<const uint8_t> line = bytes.subspan(start, end - start);
    size_t first = 0;
    while (first < line.size() && is_space(line[first])) ++first;
    if (first < line.size()) {
      if (line[first] != '{') return false;
      if (!nlohmann::json::accept(line.begin(), line.end())) return false;
      ++checked;
    }
    start = end + 1;
  }
  return checked > 0;
}

bool header_has_comma(std::span<const uint8_t> bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '\n') {
      // Blank lines before the header do not count as the header.
      bool blank = true;
      for (size_t j = 0; j < i; ++j) blank &= is_space(bytes[j]);
      if (!blank) return false;
      return header_has_comma(bytes.subspan(i + 1));
    }
    if (bytes[i] == ',') return true;
  }
  return false;
}

// The order matters: a zip's magic is unambiguous binary, so npz first; a COCO file is one
// JSON object that is often written on ONE line, so it also passes as a one-row JSON Lines
// file and must be recognised before; JSON lines hold commas, so JSON before CSV; and a
// header with commas is CSV, where a split list separates its paths by whitespace only.
TableFormat detect_format(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kZipMagic[4] = {'P', 'K', 3, 4};
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), kZipMagic, 4) == 0) return TableFormat::Npz;
  size_t first = 0;
  while (first < bytes.size() && is_space(bytes[first])) ++first;
  if (first < bytes.size() && bytes[first] == '{') {
    const JsonOutline outline = outline_json(bytes);
    if (outline.top_values == 1 && outline.images && outline.annotations) return TableFormat::Coco;
    if (looks_like_json_lines(bytes)) return TableFormat::JsonLines;
  }
  if (header_has_comma(bytes)) return TableFormat::Csv;
  return TableFormat::List;
}

}  // namespace

const char* table_format_name(TableFormat f) {
  for (const FormatName& n : kFormatNames)
    if (n.format == f) return n.name;
  return "?";
}

TableFormat parse_table_format(const std::string& name) {
  std::string accepted;
  for (const FormatName& n : kFormatNames) {
    if (name == n.name) return n.format;
    accepted += accepted.empty() ? "" : ", ";
    accepted += n.name;
  }
  throw FatalError("unknown table format '" + name + "'; the formats are " + accepted);
}

FieldValue TableColumn::value(uint64_t row) const {
  if (!uniform) {
    if (row >= values.size())
      throw InternalError("row " + std::to_string(row) + " of the table column '" + name +
                          "', which has " + std::to_string(values.size()));
    return values[row];
  }
  FieldValue v;
  v.kind = FieldKind::Numeric;
  v.dtype = dtype;
  v.shape = row_shape;
  const size_t row_bytes = static_cast<size_t>(v.num_elements()) * dtype_size(dtype);
  const uint64_t rows = row_bytes == 0 ? 0 : data.size() / row_bytes;
  if (row_bytes != 0 && row >= rows)
    throw InternalError("row " + std::to_string(row) + " of the table column '" + name +
                        "', which has " + std::to_string(rows));
  v.data.assign(data.begin() + static_cast<std::ptrdiff_t>(row * row_bytes),
                data.begin() + static_cast<std::ptrdiff_t>((row + 1) * row_bytes));
  return v;
}

Table load_table(const std::string& path, const TableOptions& options) {
  return parse_table(path, read_table_file(path, options.max_bytes), options);
}

Table parse_table(const std::string& path, std::span<const uint8_t> bytes,
                  const TableOptions& options) {
  const TableFormat format =
      options.format == TableFormat::Auto ? detect_format(bytes) : options.format;
  Table table;
  switch (format) {
    case TableFormat::Coco:
      table = load_coco_table(path, bytes, options);
      break;
    case TableFormat::Npz:
      table = load_npz_table(path, bytes, options);
      break;
    case TableFormat::JsonLines:
      table = load_jsonl_table(path, bytes, options);
      break;
    case TableFormat::Csv:
      table = load_csv_table(path, bytes, options);
      break;
    case TableFormat::List:
    case TableFormat::Auto:
      table = load_list_table(path, bytes, options);
      break;
  }
  if (table.rows == 0) throw FatalError("table " + path + ": it has no rows");
  table.path = path;
  table.format = format;
  table.crc32 = crc32_of(bytes);
  table.bytes = bytes.size();
  return table;
}

}  // namespace tarmac
