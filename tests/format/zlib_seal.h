#pragma once
// The tests' oracle for a sealed document (manifest.json, checkpoint.json), computed apart from
// lib/format: zlib's CRC-32 of the text with the seal's digits written as 00000000, then those
// digits replaced by the CRC in hex.

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace tarmac::test {

// `indent` < 0: the compact text (checkpoint.json); otherwise dump(indent) and a newline.
inline std::string zlib_sealed(nlohmann::ordered_json j, const std::string& key, int indent) {
  j[key] = "00000000";
  std::string text = indent < 0 ? j.dump() : j.dump(indent) + "\n";
  const auto crc =
      static_cast<uint32_t>(::crc32_z(0, reinterpret_cast<const Bytef*>(text.data()), text.size()));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  text.replace(text.rfind("00000000"), 8, hex);
  return text;
}

}  // namespace tarmac::test
