#pragma once
// The readers behind load_table, one per table format (internal to lib/table).
#include <cstdint>
#include <span>
#include <string>

#include "table/table.h"

namespace tarmac {

/// An mmhuman3d HumanData .npz: rows are the first axis of the N-long arrays; the pickled
/// dicts (smplx, meta) are read by the restricted unpickler and flattened ("smplx.body_pose").
Table load_npz_table(const std::string& path, std::span<const uint8_t> bytes,
                     const TableOptions& o);

}  // namespace tarmac
