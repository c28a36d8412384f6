#pragma once
// The per-format readers behind load_table(): each gets the table's path (for messages) and
// its bytes, already read and size-checked, and returns the Table with rows, member columns
// and label columns filled (load_table adds path, format, crc32 and bytes).
#include <cstdint>
#include <span>
#include <string>

#include "table/table.h"

namespace tarmac {

/// COCO JSON: rows = annotations[] in file order, joined to images[] by image_id.
Table load_coco_table(const std::string& path, std::span<const uint8_t> bytes,
                      const TableOptions& options);
/// JSON Lines: one object per line; columns = the union of the (flattened) keys.
Table load_jsonl_table(const std::string& path, std::span<const uint8_t> bytes,
                       const TableOptions& options);
/// CSV (RFC 4180) with a header row.
Table load_csv_table(const std::string& path, std::span<const uint8_t> bytes,
                     const TableOptions& options);
/// Whitespace-separated split list: every column a member column.
Table load_list_table(const std::string& path, std::span<const uint8_t> bytes,
                      const TableOptions& options);
/// An mmhuman3d HumanData .npz: rows are the first axis of the N-long arrays; the pickled
/// dicts (smplx, meta) are read by the restricted unpickler and flattened ("smplx.body_pose").
Table load_npz_table(const std::string& path, std::span<const uint8_t> bytes,
                     const TableOptions& options);

}  // namespace tarmac
