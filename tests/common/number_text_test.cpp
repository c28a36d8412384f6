#include "common/number_text.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

using namespace tarmac;

TEST_CASE("parse_integer reads the whole text or refuses it") {
  CHECK(parse_integer("192").value == 192);
  CHECK(parse_integer("-7").value == -7);
  CHECK(parse_integer("0").ok());
  CHECK(parse_integer("007").value == 7);  // decimal, never octal
  CHECK(parse_integer("9223372036854775807").value == INT64_MAX);
  CHECK(parse_integer("-9223372036854775808").value == INT64_MIN);
  // What std::stoi read as a prefix (issue #25, item 6).
  for (const char* bad : {"192,256", "192X256", "192x256", "192.5", "1e3", "64abc", "", " 5", "5 ",
                          "+5", "0x10", "-", "--5", "inf", "nan", "1_000"}) {
    INFO(bad);
    const auto r = parse_integer(bad);
    CHECK_FALSE(r.ok());
    CHECK(r.error == "'" + std::string(bad) + "' is not an integer");
  }
  CHECK(parse_integer("9223372036854775808").error ==
        "'9223372036854775808' is out of the range of an integer");
}

TEST_CASE("parse_unsigned takes no sign") {
  CHECK(parse_unsigned("18446744073709551615").value == UINT64_MAX);
  CHECK(parse_unsigned("0").ok());
  CHECK(parse_unsigned("-1").error == "'-1' is not an integer >= 0");
  CHECK(parse_unsigned("+1").error == "'+1' is not an integer >= 0");
  CHECK(parse_unsigned("18446744073709551616").error ==
        "'18446744073709551616' is out of the range of an integer >= 0");
  CHECK_FALSE(parse_unsigned("12abc").ok());
}

TEST_CASE("parse_finite reads finite numbers only") {
  CHECK(parse_finite("1.2").value == 1.2);
  CHECK(parse_finite("-3").value == -3);
  CHECK(parse_finite("1e-3").value == 0.001);
  CHECK(parse_finite("2.5E2").value == 250);
  CHECK(parse_finite("1e-300").value == 1e-300);  // finite: the flag's range refuses it
  CHECK(parse_finite(".5").value == 0.5);
  for (const char* bad : {"inf", "-inf", "infinity", "nan", "NaN", "-nan"}) {
    INFO(bad);
    CHECK(parse_finite(bad).error == "'" + std::string(bad) + "' is not a finite number");
  }
  for (const char* bad : {"", "1.2.3", "1,5", "0x1p3", "1e", "abc", "3px", " 1", "1 ", "+1"}) {
    INFO(bad);
    CHECK(parse_finite(bad).error == "'" + std::string(bad) + "' is not a number");
  }
  CHECK(parse_finite("1e400").error == "'1e400' is beyond the range of a number");
}

TEST_CASE("number_text writes the shortest text that reads back") {
  CHECK(number_text(1.2) == "1.2");
  CHECK(number_text(30) == "30");
  CHECK(number_text(1e-300) == "1e-300");
  CHECK(number_text(1e6) == "1000000");
  CHECK(number_text(-0.25) == "-0.25");
  CHECK(number_text(1e20) == "1e+20");
  CHECK(parse_finite(number_text(0.1 + 0.2)).value == 0.1 + 0.2);
}
