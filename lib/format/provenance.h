#pragma once
// An entry of the manifest's provenance lists, "skipped", "ignored" and "duplicates"
// (docs/format.md 5): what a run left out of the dataset, and why. Convert writes them (through
// its staging logs, kSkippedLog ...), merge joins its parts' lists, and the manifest's counts
// are counted from them; one type, one writer (to_json) and one parser here.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"

namespace tarmac::format {

struct ProvenanceEntry {
  /// What the entry names, and under which key: a sample ("sample": its key), a member
  /// ("member": its name in the input) or an input not read to its end ("archive": its path).
  enum class Kind : uint8_t { Sample, Member, Archive };

  std::string input;  ///< "input": the input as the command line gave it
  Kind kind = Kind::Sample;
  std::string name;  ///< the sample's key, the member's name or the archive's path
  /// "member" of a sample's entry in "duplicates": the member left out, rather than the sample
  /// (--on-duplicate first|last); empty when the whole sample was.
  std::string member;
  std::string kept;    ///< "kept" (duplicates): the input whose occurrence was kept
  std::string code;    ///< "code": an error code's name (format.md 6), a later version's too
  std::string reason;  ///< "reason": for people
  /// Further keys, written after "reason" in their order: --dedup's duplicate_of,
  /// duplicate_of_dataset and distance, or keys of a later version, kept as they were.
  nlohmann::ordered_json extras = nlohmann::ordered_json::object();

  bool operator==(const ProvenanceEntry&) const = default;
  /// True when the entry is coded `c`.
  bool coded(ErrorCode c) const { return code == error_code_name(c); }
};

/// An entry of `kind` naming `name` of `input`, coded `code`.
ProvenanceEntry provenance_entry(std::string input, ProvenanceEntry::Kind kind, std::string name,
                                 ErrorCode code, std::string reason);

/// The entry's key for its kind: "sample", "member" or "archive".
const char* kind_key(ProvenanceEntry::Kind kind);

/// The entry as JSON: "input" (when set: every entry convert writes has one), its kind's key,
/// "member", "kept", "code" and "reason" when set (as "input"), then its extras.
nlohmann::ordered_json to_json(const ProvenanceEntry& e);

/// Parses an entry (from a manifest or a staging log, so from anywhere); `where` names it in
/// errors ("entry 3 of \"skipped\""). A ParseError when it is no object or names no sample,
/// member or archive by a string. Its other keys are for people: one that is absent leaves its
/// field empty, one that is no string is kept in `extras` as it was.
ProvenanceEntry parse_provenance_entry(const nlohmann::ordered_json& j, const std::string& where);

}  // namespace tarmac::format
