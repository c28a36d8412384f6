#pragma once
namespace tarmac {
inline constexpr const char* kVersion = "0.1.0";
}
