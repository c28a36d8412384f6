#include "format/table_metadata.h"

#include <cstdint>

#include "format/json_object.h"

namespace tarmac::format {

using json = nlohmann::ordered_json;

std::string table_metadata_text(std::string_view format, const json& metadata) {
  return json{{"format", std::string(format)}, {"metadata", metadata}}.dump();
}

TableMetadata parse_table_metadata(std::string_view text) {
  TableMetadata out;
  const json t = parse_ordered(text, false);
  if (!t.is_object()) return out;
  out.readable = true;
  const auto f = t.find("format");
  out.format = f != t.end() && f->is_string() ? f->get<std::string>() : "?";
  const auto m = t.find("metadata");
  if (m == t.end() || !m->is_object()) return out;
  out.metadata = *m;
  const auto cats = m->find("categories");
  if (cats == m->end() || !cats->is_array()) return out;
  for (const auto& c : *cats) {
    TableCategory cat;
    if (!c.is_object()) {
      cat.name = "?";
      out.categories.push_back(std::move(cat));
      continue;
    }
    const auto name = c.find("name");
    cat.name = name != c.end() && name->is_string() ? name->get<std::string>() : "?";
    if (const auto k = c.find("keypoints"); k != c.end() && k->is_array())
      cat.keypoints = k->size();
    if (const auto s = c.find("skeleton"); s != c.end() && s->is_array()) {
      cat.links = s->size();
      for (const auto& pair : *s) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
            !pair[1].is_number_integer())
          continue;
        const int64_t a = pair[0].get<int64_t>(), b = pair[1].get<int64_t>();
        if (a >= 1 && b >= 1 && a <= kMaxSkeletonJoint && b <= kMaxSkeletonJoint)
          cat.skeleton.emplace_back(static_cast<int>(a), static_cast<int>(b));
      }
    }
    out.categories.push_back(std::move(cat));
  }
  return out;
}

}  // namespace tarmac::format
