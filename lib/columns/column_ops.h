#pragma once
// `tarmac column merge|ls|rm`: joins a derived column's parts into DIR/columns/NAME.safetensors
// (docs/format.md 9), refusing while any sample lacks an output or a part was computed from
// another version of the dataset; lists and removes columns.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/stop.h"

namespace tarmac {

/// How far a merge is: reading the parts' chunks, then writing the merged file.
struct ColumnMergeProgress {
  const char* phase = "";  ///< "reading parts", "writing"
  uint64_t bytes_done = 0, bytes_total = 0;
  double seconds = 0;  ///< since the merge began
  bool final = false;  ///< the phase's last call
};

struct ColumnMergeOptions {
  std::string dir;   ///< the dataset directory
  std::string name;  ///< the column
  bool keep_parts = false;
  std::string command;  ///< recorded in the lock file
  const StopRequest* stop = nullptr;
  /// Called from the merging thread about 4 times a second, and at each phase's end.
  std::function<void(const ColumnMergeProgress&)> progress;
};

struct ColumnMergeResult {
  uint64_t samples = 0, parts = 0, chunks = 0, world = 0;
  uint64_t bytes = 0;        ///< of the merged file
  std::string dtype, shape;  ///< "F32", "[4, 128, 128]" or "ragged, 2-D"
  std::string path;
  bool parts_removed = false;
  double seconds = 0;
  uint64_t reused = 0;   ///< outputs derive took from an older column (--reuse)
  bool digests = false;  ///< the column holds the samples' input digests (format.md 9)
};

/// A merge refused because the parts do not make one complete column of this dataset; the
/// message says which samples, ranks or parts and what to do.
class ColumnRefused : public FatalError {
 public:
  using FatalError::FatalError;
};

/// Merges; throws ColumnRefused, FatalError (I/O, lock), ParseError (a bad part), Interrupted.
/// The merged file appears whole (written aside, renamed) or not at all; the parts are removed
/// after it is written unless keep_parts.
ColumnMergeResult merge_column(const ColumnMergeOptions& options);

struct ColumnInfo {
  std::string name;
  bool merged = false;  ///< NAME.safetensors exists (else only parts)
  uint64_t samples = 0;
  std::string dtype, shape;
  uint64_t bytes = 0;
  std::string fn;
  /// Empty when the column is complete and bound to this dataset; else what is wrong.
  std::string problem;
  /// Parts: world size, samples done of all, ranks complete.
  uint64_t part_world = 0, part_done = 0, part_ranks_complete = 0, part_ranks = 0;
};

/// The columns of the dataset in `dir`, by name: merged ones and those with parts only.
std::vector<ColumnInfo> list_columns(const std::string& dir);

/// Removes NAME.safetensors and NAME.parts/ (under the dataset's lock). Throws FatalError
/// when the column does not exist (naming the ones that do).
void remove_column(const std::string& dir, const std::string& name, const std::string& command);

}  // namespace tarmac
