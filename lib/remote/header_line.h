#pragma once
// One line of an HTTP response's header, as libcurl hands it to a header callback: shared by
// reads (http.cpp) and the writes of -o s3:// (upload.cpp).
#include <cctype>
#include <string>
#include <string_view>

namespace tarmac::remote {

/// Whether `line` starts with `name` (given in lower case), compared without case.
inline bool ieq_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

/// The value after the first `name_size` characters of `line`, without the spaces around it
/// and the line end.
inline std::string header_value(std::string_view line, size_t name_size) {
  std::string v(line.substr(name_size));
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
  const auto b = v.find_first_not_of(' ');
  return b == std::string::npos ? "" : v.substr(b);
}

}  // namespace tarmac::remote
