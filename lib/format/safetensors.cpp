#include "format/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "format/json_keys.h"

namespace tarmac {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& reason) {
  throw ParseError("safetensors: " + reason);
}

[[noreturn]] void fail_tensor(const std::string& name, const std::string& reason) {
  fail("tensor '" + name + "': " + reason);
}

// A valid header nests at most three deep: the top object, a tensor entry or the
// metadata object, and a shape or data_offsets array.
constexpr int kMaxDepth = 3;

// Parses the header text, refusing duplicate keys (nlohmann would keep the last one
// silently) and nesting deeper than any valid header needs.
json parse_json(std::span<const uint8_t> text) {
  const std::string_view view(reinterpret_cast<const char*>(text.data()), text.size());
  const format::JsonKeys keys =
      format::scan_json_keys(view, kMaxDepth);  // checked first, built after
  if (!keys.valid) fail("header is not valid JSON: " + keys.error);
  if (keys.too_deep) fail("header nests deeper than " + std::to_string(kMaxDepth) + " levels");
  if (!keys.duplicate.empty()) {
    if (keys.duplicate_at_top) fail_tensor(keys.duplicate, "name appears twice in the header");
    fail("key '" + keys.duplicate + "' appears twice in one object of the header");
  }
  try {
    return json::parse(view);
  } catch (const json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
}

// nlohmann parses every integer literal without a minus sign (up to 2^64-1) as unsigned;
// "-0", fractions, exponents and larger integers come out as other types.
uint64_t as_u64(const json& v, const std::string& tensor, const char* what) {
  if (!v.is_number_unsigned())
    fail_tensor(tensor, std::string(what) + " must be non-negative integers, got " + v.dump());
  return v.get<uint64_t>();
}

TensorInfo parse_tensor(const std::string& name, const json& entry, uint64_t data_size) {
  if (!entry.is_object()) fail_tensor(name, "entry is not an object");
  for (const auto& [key, value] : entry.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail_tensor(name, "unexpected key '" + key + "'");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) fail_tensor(name, std::string("missing key '") + key + "'");

  TensorInfo t;
  t.name = name;
  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) fail_tensor(name, "dtype is not a string");
  const auto parsed_dtype = dtype_from_name(dtype.get_ref<const std::string&>());
  if (!parsed_dtype) fail_tensor(name, "unknown dtype " + dtype.dump());
  t.dtype = *parsed_dtype;

  const json& shape = entry["shape"];
  if (!shape.is_array()) fail_tensor(name, "shape is not an array");
  uint64_t bytes = dtype_size(t.dtype);
  for (const json& d : shape) {
    const uint64_t dim = as_u64(d, name, "shape entries");
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail_tensor(name, "shape entry " + std::to_string(dim) + " is too large");
    if (dim != 0 && bytes > std::numeric_limits<uint64_t>::max() / dim)
      fail_tensor(name, "byte size of the shape overflows 64 bits");
    bytes *= dim;
    t.shape.push_back(static_cast<int64_t>(dim));
  }

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail_tensor(name, "data_offsets is not an array of two integers");
  const uint64_t begin = as_u64(offsets[0], name, "data_offsets");
  const uint64_t end = as_u64(offsets[1], name, "data_offsets");
  if (begin > end)
    fail_tensor(name, "data_offsets begin " + std::to_string(begin) + " is after end " +
                          std::to_string(end));
  if (end > data_size)
    fail_tensor(name, "data_offsets end " + std::to_string(end) + " is beyond the data buffer of " +
                          std::to_string(data_size) + " bytes");
  if (end - begin != bytes)
    fail_tensor(name, "data_offsets cover " + std::to_string(end - begin) + " bytes but dtype " +
                          std::string(dtype_name(t.dtype)) + " and shape need " +
                          std::to_string(bytes));
  t.begin = begin;
  t.end = end;
  return t;
}

}  // namespace

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  if (by_name.size() == tensors.size() && !tensors.empty()) {
    const auto it = std::lower_bound(
        by_name.begin(), by_name.end(), name,
        [&](uint32_t i, std::string_view n) { return std::string_view(tensors[i].name) < n; });
    return it != by_name.end() && tensors[*it].name == name ? &tensors[*it] : nullptr;
  }
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsHeader parse_safetensors(std::span<const uint8_t> file) {
  if (file.size() < 8)
    fail("file is " + std::to_string(file.size()) +
         " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<size_t>(i)];
  if (n > kMaxSafetensorsHeader)
    fail("header length " + std::to_string(n) + " exceeds the limit of " +
         std::to_string(kMaxSafetensorsHeader) + " bytes");
  if (n > file.size() - 8)
    fail("header length " + std::to_string(n) + " exceeds the " + std::to_string(file.size() - 8) +
         " bytes after the length field");

  const std::span<const uint8_t> text = file.subspan(8, static_cast<size_t>(n));
  // nlohmann's lexer stops at a NUL as if the input ended there; JSON allows none anywhere.
  if (std::find(text.begin(), text.end(), uint8_t{0}) != text.end())
    fail("header contains a NUL byte");
  const json header = parse_json(text);
  if (!header.is_object()) fail("header is not a JSON object");

  SafetensorsHeader out;
  out.data_start = 8 + n;
  const uint64_t data_size = file.size() - out.data_start;
  out.tensors.reserve(header.size());
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail("__metadata__ is not an object");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) fail("__metadata__ value of '" + mkey + "' is not a string");
        out.metadata.emplace(mkey, mvalue.get<std::string>());
      }
      continue;
    }
    TensorInfo t = parse_tensor(key, value, data_size);
    t.begin += out.data_start;
    t.end += out.data_start;
    out.tensors.push_back(std::move(t));
  }

  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t expected = out.data_start;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : out.tensors) {
    if (t.begin < expected) fail_tensor(t.name, "overlaps tensor '" + previous->name + "'");
    if (t.begin > expected)
      fail_tensor(t.name, "leaves a hole of " + std::to_string(t.begin - expected) +
                              " unused bytes before it");
    expected = t.end;
    previous = &t;
  }
  if (expected != file.size())
    fail(std::to_string(file.size() - expected) + " unused bytes at the end of the data buffer");
  out.by_name.resize(out.tensors.size());
  for (size_t i = 0; i < out.tensors.size(); ++i) out.by_name[i] = static_cast<uint32_t>(i);
  std::sort(out.by_name.begin(), out.by_name.end(),
            [&](uint32_t a, uint32_t b) { return out.tensors[a].name < out.tensors[b].name; });
  return out;
}

}  // namespace tarmac
