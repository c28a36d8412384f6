#include "common/bytes.h"

#include <catch2/catch.hpp>

using tarmac::format_bytes;

TEST_CASE("format_bytes: binary units, one decimal above bytes") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1) == "1 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.0 KiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(64ull << 20) == "64.0 MiB");
  CHECK(format_bytes(1ull << 30) == "1.0 GiB");
  CHECK(format_bytes(3ull << 40) == "3.0 TiB");
  CHECK(format_bytes(5ull << 50) == "5.0 PiB");
  CHECK(format_bytes(UINT64_MAX) == "16.0 EiB");
}

TEST_CASE("format_bytes: a value that rounds to 1024 of a unit is shown in the next") {
  CHECK(format_bytes(1024 * 1024 - 1) == "1.0 MiB");
  CHECK(format_bytes(1023 * 1024 + 1000) == "1.0 MiB");
  CHECK(format_bytes(1023 * 1024) == "1023.0 KiB");
  CHECK(format_bytes((1ull << 30) - 1) == "1.0 GiB");
}
