#pragma once
// Annotation tables (convert --table): one ROW per output sample, read from a file beside the
// inputs. A row names the members it uses (its image, and for split lists its dense maps) by
// their paths in the inputs, and carries label values, one per column. Every table is
// untrusted input: parsed defensively, never executed. The formats (docs/cli.md, "Annotation
// tables"):
//  - COCO JSON: rows = annotations[] in file order, joined to images[] by image_id; member
//    column "image" = images[].file_name; bbox F64 [4], keypoints F64 [K, 3], ids I64, area
//    F64, segmentation JSON text, other keys typed as JSON labels, image.width/height/id;
//    metadata: categories, coco_info. Read through a SAX parser (no whole-document DOM).
//  - npz (mmhuman3d HumanData): rows = the first axis of the N-long arrays, pickled dicts read
//    by a restricted unpickler (npz_table.cpp).
//  - JSON Lines: one object per line; columns = the union of the flattened keys, typed as
//    .json labels; missing or null -> null. Image column `image_path`.
//  - CSV (RFC 4180, header row): integer columns I64, numeric F64, empty cells null, any other
//    text makes the column String. Image column `image_path`.
//  - split list: whitespace-separated paths per line, `#` comments; every column a member
//    column ("image", "path1", ... or TableOptions::list_columns), no label columns.
// Auto-detection looks at the content, never the file name (table.cpp says why the order).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "labels/field_value.h"

namespace tarmac {

enum class TableFormat { Auto, Coco, Npz, JsonLines, Csv, List };

/// "auto", "coco", "npz", "jsonl", "csv", "list" (the --table-format values).
const char* table_format_name(TableFormat f);
/// Throws FatalError naming the accepted values.
TableFormat parse_table_format(const std::string& name);

struct TableOptions {
  TableFormat format = TableFormat::Auto;
  /// The column holding each row's image path (--table-image); empty: the format's default
  /// (`image_path` for npz, JSON Lines and CSV; `images[].file_name` for COCO; `image` in a
  /// list).
  std::string image_column;
  /// Names of a split list's columns, in order (--table-columns); empty: "image", then
  /// "path1", "path2", ... Every column of a list is a member column.
  std::vector<std::string> list_columns;
  /// Largest table file, and the most an npz's members may inflate to together.
  uint64_t max_bytes = 1ull << 34;
  /// Largest CSV cell or JSON Lines line (--max-label-size): a row's value is copied a few
  /// times on its way into a column, and a JSON line costs ~25-40x its text while parsed.
  uint64_t max_cell_bytes = 16ull << 20;
};

/// One label column: a value per row. Uniform columns (every row the same dtype and shape,
/// numeric) keep all rows in one buffer; the others keep a FieldValue per row (strings, JSON
/// text, ragged arrays, nulls).
struct TableColumn {
  std::string name;
  bool uniform = false;
  DType dtype = DType::F64;        ///< uniform: the element type
  std::vector<int64_t> row_shape;  ///< uniform: every row's shape ({} for scalars)
  std::vector<uint8_t> data;       ///< uniform: rows x row bytes, little-endian, C order
  std::vector<FieldValue> values;  ///< not uniform: one per row (null where a row has none)

  /// Row `row`'s value (a copy, owning its bytes), with its shape. Throws InternalError
  /// past the last row.
  FieldValue value(uint64_t row) const;
};

struct Table {
  std::string path;                        ///< as given
  TableFormat format = TableFormat::Auto;  ///< as detected or forced
  uint64_t rows = 0;
  /// Columns holding member paths, the image's first ("image_path", "depth", ...); as written
  /// in the table (the converter normalises: --table-prefix, leading "./").
  std::vector<std::string> member_columns;
  /// member_paths[c][row]: the path in member column c of the row.
  std::vector<std::vector<std::string>> member_paths;
  /// Label columns, in table order. Nested dicts are flattened with dots ("smplx.body_pose",
  /// "meta.gender"); COCO's keypoints are [17, 3].
  std::vector<TableColumn> columns;
  /// What the table says beyond its rows: COCO's categories (names, keypoints, skeleton),
  /// npz's 0-d members and scalars. Goes into the annotation file's metadata.
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  /// A member or key that is no column, with the reason ("'__keypoints_compressed__': 0-d
  /// flag, in the metadata" is metadata, not this; "'keypoints2d_mask': 190 long, not N = 4000").
  struct Ignored {
    std::string reason;
    /// Its values are nowhere in the dataset though it looks like labels (an array not N rows
    /// long, too big for the metadata: a HumanData array a row short is a broken file as often
    /// as not): convert warns. Otherwise (kept in the metadata, or a key no table format
    /// reads, such as COCO's `licenses`) it says so as information.
    bool values_lost = false;
  };
  std::vector<Ignored> ignored;
  /// CRC-32 of the table file's bytes, for the manifest's provenance.
  uint32_t crc32 = 0;
  uint64_t bytes = 0;
};

/// Reads a table. Throws FatalError naming the file (and the row, member or key) and the
/// reason for anything malformed: the whole table is read before any sample is converted.
Table load_table(const std::string& path, const TableOptions& options);

/// Parses a table whose bytes were read elsewhere (an s3:// or http(s):// table, downloaded by
/// the converter), as load_table() parses a file's; `path` names it in messages.
Table parse_table(const std::string& path, std::span<const uint8_t> bytes,
                  const TableOptions& options);

}  // namespace tarmac
