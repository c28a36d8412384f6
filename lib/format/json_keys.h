#pragma once
// One linear pass over JSON text that builds nothing: how deep it nests, every object's keys
// (a key twice in one object is reported) and the top-level object's keys in document order.
// nlohmann's parse with a callback rescans a growing parent object at each nested object's end,
// so a header or schema of 30 000 fields took seconds; this pass then a plain parse does not.
#include <string>
#include <string_view>
#include <vector>

namespace tarmac::format {

struct JsonKeys {
  bool valid = true;                  ///< false: not JSON (`error` says why)
  std::string error;                  ///< nlohmann's message when not valid
  bool too_deep = false;              ///< nests deeper than asked
  std::string duplicate;              ///< the first key found twice in one object ("" when none)
  bool duplicate_at_top = false;      ///< that key is one of the top-level object's
  std::vector<std::string> top_keys;  ///< the top-level object's keys, in document order
};

/// Walks `text` once; stops at the first problem (invalid, too deep, a duplicate key).
JsonKeys scan_json_keys(std::string_view text, int max_depth);

}  // namespace tarmac::format
