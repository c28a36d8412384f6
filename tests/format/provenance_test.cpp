#include "format/provenance.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"

using namespace tarmac::format;
using tarmac::ErrorCode;
using tarmac::ParseError;
using json = nlohmann::ordered_json;
using Kind = ProvenanceEntry::Kind;

// The texts are the entries as tarmac 0.1 wrote them (key order included) and as format.md 5
// lists them: convert's records, byte for byte, must not change with the type behind them.
TEST_CASE("provenance: every entry convert writes, its keys in format.md's order") {
  const std::vector<std::pair<ProvenanceEntry, std::string>> cases = [] {
    std::vector<std::pair<ProvenanceEntry, std::string>> c;
    c.emplace_back(provenance_entry("in.tar", Kind::Sample, "a", ErrorCode::NoImage, "no image"),
                   R"({"input":"in.tar","sample":"a","code":"no_image","reason":"no image"})");
    c.emplace_back(provenance_entry("in.tar", Kind::Member, "x.bin", ErrorCode::UnusedMember, "r"),
                   R"({"input":"in.tar","member":"x.bin","code":"unused_member","reason":"r"})");
    c.emplace_back(provenance_entry("b.tar", Kind::Archive, "b.tar", ErrorCode::InputError, "cut"),
                   R"({"input":"b.tar","archive":"b.tar","code":"input_error","reason":"cut"})");
    ProvenanceEntry dup =
        provenance_entry("2.tar", Kind::Sample, "k", ErrorCode::DuplicateMember, "twice");
    dup.member = "k.json";
    dup.kept = "1.tar";
    c.emplace_back(dup, R"({"input":"2.tar","sample":"k","member":"k.json","kept":"1.tar",)"
                        R"("code":"duplicate_member","reason":"twice"})");
    ProvenanceEntry near =
        provenance_entry("in.tar", Kind::Sample, "b", ErrorCode::DuplicateContent, "near");
    near.extras["duplicate_of"] = "a";
    near.extras["duplicate_of_dataset"] = "ref";
    near.extras["distance"] = 3;
    c.emplace_back(near, R"({"input":"in.tar","sample":"b","code":"duplicate_content",)"
                         R"("reason":"near","duplicate_of":"a","duplicate_of_dataset":"ref",)"
                         R"("distance":3})");
    return c;
  }();
  for (const auto& [entry, text] : cases) {
    INFO(text);
    CHECK(to_json(entry).dump() == text);
    const ProvenanceEntry back = parse_provenance_entry(json::parse(text), "entry 0 of \"x\"");
    CHECK(back == entry);
  }
  CHECK(cases[0].first.coded(ErrorCode::NoImage));
  CHECK_FALSE(cases[0].first.coded(ErrorCode::BadImage));
}

TEST_CASE("provenance: an entry from anywhere keeps what it holds, typed or not") {
  // A later version's key, a code that is no string, no input: all written back as they were.
  const json foreign =
      json::parse(R"({"member":"a","code":5,"reason":"r","since":"0.9","kept":["x"]})");
  const ProvenanceEntry e = parse_provenance_entry(foreign, "entry 0 of \"ignored\"");
  CHECK(e.kind == Kind::Member);
  CHECK(e.name == "a");
  CHECK(e.input.empty());
  CHECK(e.code.empty());
  CHECK_FALSE(e.coded(ErrorCode::UnusedImage));
  CHECK(e.kept.empty());
  CHECK(e.extras == json::parse(R"({"code":5,"since":"0.9","kept":["x"]})"));
  const json back = to_json(e);
  CHECK(back.size() == foreign.size());
  for (auto it = foreign.begin(); it != foreign.end(); ++it) CHECK(back.at(it.key()) == *it);
  // A member's entry holding an archive too: the archive is an extra, the member names it.
  const ProvenanceEntry both = parse_provenance_entry(
      json::parse(R"({"input":"i","member":"m","archive":"z","code":"c","reason":"r"})"), "e");
  CHECK((both.kind == Kind::Member && both.name == "m" && both.extras.at("archive") == "z"));
}

TEST_CASE("provenance: no object, or naming nothing by a string, is a ParseError naming it") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("a")", "entry 2 of \"skipped\" is not an object"},
      {R"({"input":"i","code":"c","reason":"r"})",
       "entry 2 of \"skipped\" names no sample, member or archive"},
      {R"({"input":"i","sample":7,"code":"c","reason":"r"})",
       "entry 2 of \"skipped\" names its sample by no string"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    CHECK_THROWS_WITH(parse_provenance_entry(json::parse(text), "entry 2 of \"skipped\""),
                      Catch::Matchers::Contains(message));
    CHECK_THROWS_AS(parse_provenance_entry(json::parse(text), "e"), ParseError);
  }
}
