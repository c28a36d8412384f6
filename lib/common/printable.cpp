#include "common/printable.h"

#include <cstdint>

#include "common/utf8.h"

namespace tarmac {

namespace {

/// The length of the valid UTF-8 sequence starting at s[i], or 0 when none starts there.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto c = static_cast<uint8_t>(s[i]);
  const size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
  if (len == 0 || s.size() - i < len || !is_valid_utf8(s.substr(i, len))) return 0;
  return len;
}

void append_hex(std::string& out, uint8_t b) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out.push_back(kHex[b >> 4]);
  out.push_back(kHex[b & 0xF]);
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t len = utf8_sequence(s, i);
    if (len == 1 && c >= 0x20 && c != 0x7F) {
      if (c == '\\') out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (len == 1) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else
        append_hex(out, c);
    } else if (len == 2 && c == 0xC2 && static_cast<uint8_t>(s[i + 1]) < 0xA0) {
      // U+0080..U+009F, the C1 controls: U+009B is a terminal's CSI as ESC [ is
      append_hex(out, c);
      append_hex(out, static_cast<uint8_t>(s[i + 1]));
    } else if (len > 1) {
      out.append(s.substr(i, len));
    } else {
      append_hex(out, c);
      i += 1;
      continue;
    }
    i += len;
  }
  return out;
}

}  // namespace tarmac
