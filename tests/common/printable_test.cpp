#include "common/printable.h"

#include <catch2/catch.hpp>

using tarmac::printable;

TEST_CASE("printable: plain text and UTF-8 are kept") {
  CHECK(printable("") == "");
  CHECK(printable("a/0000.jpg") == "a/0000.jpg");
  CHECK(printable("caf\xC3\xA9/\xE2\x82\xAC/\xF0\x9F\x98\x80") ==
        "caf\xC3\xA9/\xE2\x82\xAC/\xF0\x9F\x98\x80");
  CHECK(printable("a b~") == "a b~");
}

TEST_CASE("printable: newline, tab, return and backslash as their escapes") {
  CHECK(printable("nl\n") == "nl\\n");
  CHECK(printable("a\tb\rc") == "a\\tb\\rc");
  CHECK(printable("a\\nb") == "a\\\\nb");  // a backslash then n is not a newline
  CHECK(printable("\\") == "\\\\");
}

TEST_CASE("printable: other control characters as \\xNN, lowercase hex") {
  CHECK(printable(std::string_view("\0", 1)) == "\\x00");
  CHECK(printable("\x1B[31mred") == "\\x1b[31mred");
  CHECK(printable("\x7F") == "\\x7f");
  CHECK(printable("\x01\x1F") == "\\x01\\x1f");
  // C1 controls (U+0080..U+009F) are well-formed UTF-8 but a terminal acts on them (U+009B, CSI)
  CHECK(printable("\xC2\x9B"
                  "31m") == "\\xc2\\x9b31m");
  CHECK(printable("\xC2\x80") == "\\xc2\\x80");
  CHECK(printable("\xC2\xA0") == "\xC2\xA0");  // U+00A0 is printable
}

TEST_CASE("printable: bytes that are not valid UTF-8 as \\xNN, one per byte") {
  CHECK(printable("a/\xFF"
                  "1.jpg") == "a/\\xff1.jpg");
  CHECK(printable("\xC3") == "\\xc3");                             // cut short at the end
  CHECK(printable("\xC3(") == "\\xc3(");                           // bad continuation
  CHECK(printable("\xC0\xAF") == "\\xc0\\xaf");                    // overlong '/'
  CHECK(printable("\xED\xA0\x80") == "\\xed\\xa0\\x80");           // a surrogate
  CHECK(printable("\xF4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(printable("\xE2\x82"
                  "x\xE2\x82\xAC") == "\\xe2\\x82x\xE2\x82\xAC");  // bad, then good
}

TEST_CASE("printable: the result is valid UTF-8 with no control characters") {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string p = printable(all);
  for (unsigned char c : p) CHECK((c >= 0x20 && c != 0x7F));
  // 95 printable ASCII bytes stay (the backslash doubled), \n \t \r take 2, other bytes 4 each
  CHECK(p.size() == 95 + 1 + 3 * 2 + 30 * 4 + 128 * 4);
}
