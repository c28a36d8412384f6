#pragma once
#include <string>
#include <string_view>

namespace tarmac {

/// `s` made safe to print on a terminal and to put in JSON: valid UTF-8 text is kept, a backslash
/// becomes `\\`, newline, tab and carriage return `\n` `\t` `\r`, and every other control
/// character (C0, DEL, C1) and every byte that is not part of valid UTF-8 `\xNN` (lowercase hex,
/// one per byte). The result is valid UTF-8 and tells apart any two different inputs.
std::string printable(std::string_view s);

}  // namespace tarmac
