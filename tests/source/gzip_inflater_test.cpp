// GzipInflater (ISA-L) against zlib, the independent oracle: zlib compresses, ISA-L must give
// the bytes back whatever the chunking, and refuse every cut-short or corrupted stream.
#include <zlib.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "source/gzip_inflater.h"

using tarmac::GzipInflater;
using tarmac::ParseError;

namespace {

std::vector<uint8_t> gzip(const std::vector<uint8_t>& data, int level) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(deflateBound(&z, data.size()) + 64);
  z.next_in = const_cast<uint8_t*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Half text-like (compressible), half random, so both kinds of deflate blocks occur.
std::vector<uint8_t> sample_data(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i < n / 2 ? static_cast<uint8_t>("tarmac sample label "[i % 20] + (rng() % 3 == 0))
                     : static_cast<uint8_t>(rng());
  return v;
}

// Feeds `gz` in chunks of random size and reads with random output sizes, as read_cb does.
std::vector<uint8_t> inflate_all(const std::vector<uint8_t>& gz, uint32_t seed) {
  std::mt19937 rng(seed);
  GzipInflater inf;
  std::vector<uint8_t> out, buf;
  size_t pos = 0;
  bool end = false;
  while (true) {
    std::vector<uint8_t> chunk(1 + rng() % 7000);
    const size_t got = inf.read(chunk.data(), chunk.size(), end);
    out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<long>(got));
    if (got > 0) continue;
    if (end) return out;
    const size_t n = std::min<size_t>(gz.size() - pos, 1 + rng() % 5000);
    if (n == 0) {
      end = true;
      continue;
    }
    buf.assign(gz.begin() + static_cast<long>(pos), gz.begin() + static_cast<long>(pos + n));
    pos += n;
    inf.feed(buf.data(), buf.size());
  }
}

}  // namespace

TEST_CASE("GzipInflater: zlib's gzip back, any chunking, concatenated members, padding") {
  const auto a = sample_data(300000, 1), b = sample_data(70000, 2);
  const std::vector<uint8_t> empty;
  std::vector<uint8_t> stream = gzip(a, 6);
  for (const auto& more : {gzip(empty, 6), gzip(b, 1), gzip(b, 9)})
    stream.insert(stream.end(), more.begin(), more.end());
  std::vector<uint8_t> want;
  want.reserve(a.size() + 2 * b.size());
  for (const auto* part : {&a, &b, &b}) want.insert(want.end(), part->begin(), part->end());
  for (uint32_t seed = 0; seed < 5; ++seed) CHECK(inflate_all(stream, seed) == want);
  stream.resize(stream.size() + 1024, 0);  // zero padding after the last member (tape blocks)
  CHECK(inflate_all(stream, 7) == want);
  CHECK(GzipInflater::starts_gzip(stream.data(), 3));
  CHECK_FALSE(GzipInflater::starts_gzip(a.data(), 3));
  CHECK_FALSE(GzipInflater::starts_gzip(stream.data(), 2));
}

TEST_CASE("GzipInflater: a stream cut short anywhere is refused") {
  const auto gz = gzip(sample_data(50000, 3), 6);
  for (size_t cut : {size_t{10}, size_t{100}, gz.size() / 3, gz.size() / 2, gz.size() - 9,
                     gz.size() - 8, gz.size() - 4, gz.size() - 1}) {
    INFO("cut at " << cut << " of " << gz.size());
    const std::vector<uint8_t> part(gz.begin(), gz.begin() + static_cast<long>(cut));
    CHECK_THROWS_AS(inflate_all(part, 1), ParseError);
  }
}

TEST_CASE("GzipInflater: corrupt data, a wrong checksum and trailing garbage are refused") {
  const auto data = sample_data(50000, 4);
  const auto gz = gzip(data, 6);
  SECTION("a flipped byte in the compressed data (CRC-32 or block check)") {
    for (size_t at : {gz.size() / 4, gz.size() / 2, gz.size() * 3 / 4}) {
      auto bad = gz;
      bad[at] ^= 0x55;
      CHECK_THROWS_AS(inflate_all(bad, 2), ParseError);
    }
  }
  SECTION("a wrong CRC-32 in the trailer") {
    auto bad = gz;
    bad[bad.size() - 8] ^= 1;
    CHECK_THROWS_WITH(inflate_all(bad, 2), Catch::Contains("corrupt"));
  }
  SECTION("bytes after the stream that are not another member") {
    auto bad = gz;
    bad.push_back('x');
    CHECK_THROWS_WITH(inflate_all(bad, 2), Catch::Contains("after the end"));
  }
}
