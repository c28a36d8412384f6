#include "common/bytes.h"

#include <cstdio>

namespace tarmac {

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLast = 6;
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  // 1023.97 KiB would print as "1024.0 KiB": that is 1.0 MiB.
  while (u < kLast && v >= 1023.95) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace tarmac
