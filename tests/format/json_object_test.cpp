#include "format/json_object.h"

#include <catch2/catch.hpp>
#include <random>
#include <sstream>
#include <string>

using nlohmann::ordered_json;
using tarmac::format::parse_ordered;

namespace {

// A random document: nested objects and arrays, repeated keys, every kind of value.
std::string random_json(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 3 ? 5 : 7));
  switch (kind) {
    case 0:
      return "null";
    case 1:
      return rng() % 2 ? "true" : "false";
    case 2:
      return std::to_string(static_cast<int>(rng() % 2000) - 1000);
    case 3:
      return std::to_string(rng() % 1000) + ".25e-1";
    case 4:
      return "\"s" + std::to_string(rng() % 50) + "\\u00e9\"";
    case 5: {
      std::string a = "[";
      for (int i = 0, n = static_cast<int>(rng() % 5); i < n; ++i)
        a += (i ? "," : "") + random_json(rng, depth + 1);
      return a + "]";
    }
    default: {
      std::string o = "{";
      for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i)
        o += (i ? "," : "") + std::string("\"k") + std::to_string(rng() % 4) +
             "\":" + random_json(rng, depth + 1);
      return o + "}";
    }
  }
}

}  // namespace

TEST_CASE("parse_ordered gives what nlohmann's ordered parse gives, repeated keys included") {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_json(rng, 0);
    const ordered_json want = ordered_json::parse(text);
    const ordered_json got = parse_ordered(text);
    INFO(text);
    REQUIRE(got.dump() == want.dump());
    std::istringstream in(text);
    REQUIRE(parse_ordered(in).dump() == want.dump());
  }
  CHECK(parse_ordered(R"({"b":1,"a":2,"b":3})").dump() == R"({"b":3,"a":2})");
}

TEST_CASE("parse_ordered: invalid text throws nlohmann's parse_error, or is discarded") {
  for (const char* bad : {"", "{", R"({"a":})", "[1,]", "{} x", R"({"a":1,})"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_ordered(bad), nlohmann::json::parse_error);
    CHECK(parse_ordered(bad, false).is_discarded());
    CHECK(ordered_json::parse(bad, nullptr, false).is_discarded());
  }
}

TEST_CASE("parse_ordered reads an object of 200 000 keys in their order") {
  std::string text = "{";
  for (int i = 0; i < 200000; ++i)
    text += (i ? ",\"" : "\"") + std::to_string(199999 - i) + "\":" + std::to_string(i);
  text += "}";
  const ordered_json j = parse_ordered(text);
  REQUIRE(j.size() == 200000);
  CHECK(j.begin().key() == "199999");
  CHECK(j.begin().value() == 0);
  CHECK((--j.end()).key() == "0");
  CHECK(j.find("100")->get<int>() == 199899);
}

TEST_CASE("integer_of: integers in range only, never a float cast") {
  using tarmac::format::integer_of;
  const auto j = [](const char* text) { return ordered_json::parse(text); };
  CHECK(integer_of<uint32_t>(j("4294967295")) == 4294967295u);
  CHECK_FALSE(integer_of<uint32_t>(j("4294967296")));
  CHECK_FALSE(integer_of<uint32_t>(j("-1")));
  CHECK_FALSE(integer_of<uint64_t>(j("4.24511e+47")));
  CHECK_FALSE(integer_of<uint64_t>(j("1.0")));
  CHECK_FALSE(integer_of<int>(j("\"1\"")));
  CHECK(integer_of<int>(j("-2147483648")) == -2147483648LL);
  CHECK_FALSE(integer_of<int>(j("-2147483649")));
  CHECK_FALSE(integer_of<int64_t>(j("9223372036854775808")));
  CHECK(integer_of<uint64_t>(j("18446744073709551615")) == 18446744073709551615ull);
}
