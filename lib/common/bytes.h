#pragma once
// Byte counts for people: the one formatter every message and summary uses.
#include <cstdint>
#include <string>

namespace tarmac {

/// "512 B", "1.5 KiB", "64.0 MiB", "1.0 GiB": binary units (1 KiB = 1024 B), one decimal
/// above bytes.
std::string format_bytes(uint64_t bytes);

}  // namespace tarmac
