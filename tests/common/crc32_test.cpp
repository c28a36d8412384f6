#include "common/crc32.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <random>
#include <vector>

using tarmac::crc32_update;

namespace {

// The oracle: zlib's crc32, which every zip/gzip/PNG tool agrees with.
uint32_t zlib_crc(uint32_t crc, const uint8_t* p, size_t n) {
  return static_cast<uint32_t>(::crc32_z(crc, p, n));
}

}  // namespace

TEST_CASE("crc32_update equals zlib's crc32 for every length, alignment and chaining") {
  std::mt19937 rng(7);
  std::vector<uint8_t> data((1 << 20) + 64);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t len : {0,  1,   2,   3,   15,  16,   17,   31,   63,    64,
                     65, 127, 128, 255, 256, 1000, 4095, 4096, 65537, 1 << 20}) {
    for (size_t off : {0, 1, 5, 8, 63}) {
      INFO("length " << len << ", offset " << off);
      CHECK(crc32_update(0, data.data() + off, len) == zlib_crc(0, data.data() + off, len));
      CHECK(crc32_update(0xdeadbeef, data.data() + off, len) ==
            zlib_crc(0xdeadbeef, data.data() + off, len));
    }
  }
  // Fed in random pieces, as the input reader and the tar writer feed it.
  uint32_t ours = 0;
  for (size_t at = 0; at < data.size();) {
    const size_t n = std::min<size_t>(rng() % 70000, data.size() - at);
    ours = crc32_update(ours, data.data() + at, n);
    at += n;
  }
  CHECK(ours == zlib_crc(0, data.data(), data.size()));
  CHECK(crc32_update(0x12345678, nullptr, 0) == 0x12345678);
  // The check value of the CRC-32 catalogue: "123456789" -> cbf43926.
  const char* check = "123456789";
  CHECK(crc32_update(0, check, 9) == 0xcbf43926u);
  CHECK(tarmac::crc32_of({}) == 0);
}

TEST_CASE("Crc32Concat gives the CRC-32 of pieces laid end to end from their own CRC-32s") {
  std::mt19937 rng(11);
  std::vector<uint8_t> data(3 << 20);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  // Pieces of a few repeated lengths (latents of buckets), empty ones, and more distinct
  // lengths than the operator cache keeps.
  for (const bool many_lengths : {false, true}) {
    INFO((many_lengths ? "many" : "few") << " distinct lengths");
    tarmac::Crc32Concat joined;
    size_t at = 0;
    for (int k = 0; at < data.size(); ++k) {
      const size_t want =
          many_lengths ? rng() % 5000 : std::vector<size_t>{0, 4096, 6144, 6144}[k % 4];
      const size_t n = std::min(want, data.size() - at);
      joined.append(zlib_crc(0, data.data() + at, n), n);
      at += n;
    }
    CHECK(joined.value() == zlib_crc(0, data.data(), data.size()));
  }
  tarmac::Crc32Concat empty;
  empty.append(0, 0);
  CHECK(empty.value() == 0);
}
