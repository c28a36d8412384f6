#include "format/provenance.h"

#include <array>
#include <utility>

namespace tarmac::format {
namespace {

using json = nlohmann::ordered_json;
using Kind = ProvenanceEntry::Kind;

constexpr std::array<Kind, 3> kKinds = {Kind::Sample, Kind::Member, Kind::Archive};

}  // namespace

ProvenanceEntry provenance_entry(std::string input, Kind kind, std::string name, ErrorCode code,
                                 std::string reason) {
  ProvenanceEntry e;
  e.input = std::move(input);
  e.kind = kind;
  e.name = std::move(name);
  e.code = error_code_name(code);
  e.reason = std::move(reason);
  return e;
}

const char* kind_key(Kind kind) {
  switch (kind) {
    case Kind::Sample:
      return "sample";
    case Kind::Member:
      return "member";
    case Kind::Archive:
      return "archive";
  }
  return "sample";
}

json to_json(const ProvenanceEntry& e) {
  json j = json::object();
  if (!e.input.empty()) j["input"] = e.input;
  j[kind_key(e.kind)] = e.name;
  if (e.kind == Kind::Sample && !e.member.empty()) j["member"] = e.member;
  if (!e.kept.empty()) j["kept"] = e.kept;
  if (!e.code.empty()) j["code"] = e.code;
  if (!e.reason.empty()) j["reason"] = e.reason;
  for (auto it = e.extras.begin(); it != e.extras.end(); ++it) j[it.key()] = it.value();
  return j;
}

ProvenanceEntry parse_provenance_entry(const json& j, const std::string& where) {
  if (!j.is_object()) throw ParseError("manifest: " + where + " is not an object");
  ProvenanceEntry e;
  bool named = false;
  for (const Kind k : kKinds) {
    const auto it = j.find(kind_key(k));
    if (it == j.end()) continue;
    if (!it->is_string())
      throw ParseError("manifest: " + where + " names its " + kind_key(k) + " by no string");
    e.kind = k;
    e.name = it->get<std::string>();
    named = true;
    break;
  }
  if (!named)
    throw ParseError("manifest: " + where +
                     " names no sample, member or archive (\"sample\", \"member\" or \"archive\")");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == kind_key(e.kind)) continue;
    std::string* field = key == "input"                              ? &e.input
                         : key == "code"                             ? &e.code
                         : key == "reason"                           ? &e.reason
                         : key == "kept"                             ? &e.kept
                         : key == "member" && e.kind == Kind::Sample ? &e.member
                                                                     : nullptr;
    // The entries are for people, and a manifest from anywhere may type them otherwise: a known
    // key that is no string is kept among the extras as it was, lost on no rewrite.
    if (field && it->is_string())
      *field = it->get<std::string>();
    else
      e.extras[key] = it.value();
  }
  return e;
}

}  // namespace tarmac::format
