#include "source/member.h"

#include <algorithm>
#include <cctype>

namespace tarmac {

const char* key_rule_name(KeyRule r) {
  return r == KeyRule::LastDot ? "last-dot" : "first-dot";
}

bool split_member_name(const std::string& name, std::string& key, std::string& ext, KeyRule rule) {
  size_t slash = name.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = rule == KeyRule::LastDot ? name.rfind('.') : name.find('.', base);
  if (dot == std::string::npos || dot <= base || dot + 1 == name.size()) return false;
  key = name.substr(0, dot);
  ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

bool is_image_extension(const std::string& ext, const std::vector<std::string>& image_exts) {
  for (const auto& e : image_exts)
    if (ext == e ||
        (ext.size() > e.size() + 1 && ext.ends_with(e) && ext[ext.size() - e.size() - 1] == '.'))
      return true;
  return false;
}

bool is_hidden_or_metadata(const std::string& name) {
  if (name.rfind("__MACOSX/", 0) == 0) return true;
  const size_t slash = name.rfind('/');
  const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
  return !base.empty() && base[0] == '.';
}

std::string unsafe_name_reason(const std::string& name) {
  if (name.empty()) return "empty member name";
  if (name.front() == '/') return "absolute path";
  if (name.find('\0') != std::string::npos) return "NUL byte in name";
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    std::string_view part(name.data() + start, end - start);
    if (part == "..") return "'..' path component";
    if (part.empty()) return "empty path component";
    start = end + 1;
  }
  return "";
}

}  // namespace tarmac
