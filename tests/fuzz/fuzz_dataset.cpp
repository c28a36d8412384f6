// libFuzzer target: the reader's whole path through the C API the Python package uses. The
// input is a dataset directory (labels.safetensors and its shards, format below); it must open
// or fail with TARMAC_E_IO / TARMAC_E_PARSE, and every access of an opened dataset (keys,
// values, columns, blobs, decoded sizes, decoding, a BatchLoader batch) must succeed or fail
// with TARMAC_E_DATA. Anything else (a crash, a sanitizer report, TARMAC_E_INTERNAL, a view
// outside its file, bytes other than the file's) is a bug.
//
// Input: [u32le L][L bytes: labels.safetensors] then parts [u32le len][len bytes], written as
// shard-000000.tar, shard-000001.tar...; a length past the end takes the rest (so does L).
// tests/fuzz/make_seed_corpus.py packs datasets made by `tarmac convert` this way.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/safetensors.h"
#include "read/c_api.h"

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxShards = 8;
constexpr size_t kMaxSamples = 64;             // samples visited per input, to keep runs fast
constexpr int64_t kMaxDecodePixels = 1 << 20;  // decoded only below this (allocation bound)
constexpr int kMaxDecodes = 4;

fs::path g_dir;

[[noreturn]] void bug(const char* what, int code = 0) {
  std::fprintf(stderr, "fuzz_dataset: %s (code %d: %s)\n", what, code, tarmac_last_error());
  __builtin_trap();
}

// An access of an opened dataset may only fail as TARMAC_E_DATA.
bool ok_or_data(int code, const char* what) {
  if (code != TARMAC_OK && code != TARMAC_E_DATA) bug(what, code);
  return code == TARMAC_OK;
}

void write_file(const fs::path& p, std::span<const uint8_t> b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) bug("cannot write the temp dataset");
}

std::span<const uint8_t> take_part(std::span<const uint8_t>& in) {
  uint32_t len = 0;
  const size_t head = std::min<size_t>(4, in.size());
  std::memcpy(&len, in.data(), head);
  in = in.subspan(head);
  const size_t n = std::min<size_t>(len, in.size());
  const auto part = in.first(n);
  in = in.subspan(n);
  return part;
}

std::string shard_file(size_t k) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06zu.tar", k);
  return name;
}

struct Files {
  std::span<const uint8_t> labels;
  std::map<std::string, std::span<const uint8_t>> by_name;
};

// Every view a dataset returns into labels.safetensors must lie inside its mapping.
struct LabelsMap {
  const uint8_t* base = nullptr;
  size_t size = 0;
  void check(const void* p, size_t n, const char* what) const {
    const auto* b = static_cast<const uint8_t*>(p);
    if (n == 0 || base == nullptr) return;  // base: unknown when every tensor is a ragged name
    if (b < base || b > base + size || n > size_t(base + size - b)) bug(what);
  }
};

// A .npy dense map: an array inside its blob's bytes, of the blob's size, or TARMAC_E_DATA;
// a kind stored otherwise is TARMAC_E_INVALID.
void check_dense(tarmac_dataset* ds, const char* kind, size_t i, bool npy, const uint8_t* blob,
                 size_t blob_size, int32_t width, int32_t height) {
  tarmac_tensor t;
  const int code = tarmac_dense(ds, int64_t(i), kind, &t);
  if (!npy) {
    if (code != TARMAC_E_INVALID) bug("dense array of a kind not stored as .npy", code);
    return;
  }
  if (!ok_or_data(code, "dense")) return;
  if (t.ndim < 2 || t.ndim > 3 || t.shape[0] != height || t.shape[1] != width)
    bug("dense array shape is not the blob's size");
  if (!tarmac_dtype_name(t.dtype)) bug("dense array dtype");
  const auto* d = static_cast<const uint8_t*>(t.data);
  if (t.nbytes && (d < blob || d > blob + blob_size || t.nbytes > size_t(blob + blob_size - d)))
    bug("dense array outside its blob");
  uint64_t elems = 1;
  for (int k = 0; k < t.ndim; ++k) elems *= uint64_t(t.shape[k]);
  if (elems && t.nbytes % elems != 0) bug("dense array bytes do not match its shape");
}

void check_opened(tarmac_dataset* ds, const Files& files) {
  const auto h = tarmac::parse_safetensors(files.labels);  // Dataset parsed the same bytes
  const int64_t n = tarmac_size(ds);
  if (n < 0) bug("negative size");
  const size_t visit = std::min<size_t>(size_t(n), kMaxSamples);

  int64_t nf = 0, nb = 0;
  if (tarmac_num_fields(ds, &nf) || tarmac_num_blob_kinds(ds, &nb)) bug("counts");
  std::vector<tarmac_field> fields(static_cast<size_t>(nf));
  std::set<std::string> ragged;
  for (int64_t k = 0; k < nf; ++k) {
    if (int c = tarmac_field_info(ds, k, &fields[size_t(k)])) bug("field_info", c);
    if (fields[size_t(k)].ragged) ragged.insert(fields[size_t(k)].name);
  }
  std::vector<const char*> kinds(static_cast<size_t>(nb));
  for (int64_t k = 0; k < nb; ++k)
    if (int c = tarmac_blob_kind(ds, k, &kinds[size_t(k)])) bug("blob_kind", c);

  // Columns by tensor name find where the file is mapped, and must be exactly its tensors.
  LabelsMap map;
  map.size = files.labels.size();
  for (const tarmac::TensorInfo& t : h.tensors) {
    if (ragged.count(t.name)) continue;  // column(NAME) of a ragged field is NAME.values
    tarmac_tensor c;
    if (int code = tarmac_column(ds, t.name.c_str(), &c)) bug("column of a tensor", code);
    if (c.nbytes != t.end - t.begin) bug("column size");
    if (map.base == nullptr) map.base = static_cast<const uint8_t*>(c.data) - t.begin;
    if (c.nbytes && c.data != map.base + t.begin) bug("column outside labels.safetensors");
  }

  for (size_t i = 0; i < visit; ++i) {
    const char* key = nullptr;
    size_t key_size = 0;
    if (ok_or_data(tarmac_key(ds, int64_t(i), &key, &key_size), "key"))
      map.check(key, key_size, "key outside labels.safetensors");
  }
  auto check_value = [&](const char* name, size_t i) {
    tarmac_tensor v;
    if (!ok_or_data(tarmac_value(ds, name, int64_t(i), &v), "value")) return;
    map.check(v.data, v.nbytes, "value outside labels.safetensors");
    uint64_t elems = 1;
    for (int d = 0; d < v.ndim; ++d) elems *= uint64_t(v.shape[d]);
    if (v.dtype < 0 || !tarmac_dtype_name(v.dtype)) bug("value dtype");
    if (v.nbytes == 0) return;
    if (elems == 0 || v.nbytes % elems != 0) bug("value bytes do not match its shape");
  };
  for (const tarmac_field& f : fields) {
    for (size_t i = 0; i < visit; ++i) check_value(f.name, i);
    tarmac_tensor c;
    if (int code = tarmac_column(ds, f.name, &c)) bug("column of a field", code);
    map.check(c.data, c.nbytes, "column outside labels.safetensors");
  }
  if (nb > 0)
    for (size_t i = 0; i < visit; ++i) check_value("__affine__", i);

  // Blobs: the bytes of the named shard at the stated range, nothing else.
  std::vector<std::string> shard_names;
  shard_names = nlohmann::json::parse(h.metadata.at("shards")).get<std::vector<std::string>>();
  // Kinds stored as .npy (`blob_encodings`): only they give arrays.
  std::set<std::string> npy_kinds;
  if (const auto e = h.metadata.find("blob_encodings"); e != h.metadata.end()) {
    const auto j = nlohmann::json::parse(e->second, nullptr, false);
    if (j.is_object())
      for (const auto& [k, v] : j.items())
        if (v == "npy") npy_kinds.insert(k);
  }
  for (const char* kind : kinds)
    for (size_t i = 0; i < visit; ++i) {
      int32_t shard = 0, width = 0, height = 0;
      int64_t offset = 0, size = 0;
      uint32_t crc = 0;
      const bool ref_ok = ok_or_data(
          tarmac_blob_ref(ds, int64_t(i), kind, &shard, &offset, &size, &crc, &width, &height),
          "blob_ref");
      const uint8_t* data = nullptr;
      size_t data_size = 0;
      const bool blob_ok = ok_or_data(tarmac_blob(ds, int64_t(i), kind, &data, &data_size), "blob");
      if (ref_ok != blob_ok) bug("blob and blob_ref disagree");
      if (!blob_ok) continue;
      const auto file = files.by_name.find(shard_names.at(size_t(shard)));
      if (file == files.by_name.end()) bug("blob in a shard the input did not write");
      const auto bytes = file->second;
      if (offset < 0 || size < 0 || uint64_t(offset) + uint64_t(size) > bytes.size() ||
          data_size != uint64_t(size))
        bug("blob range outside its shard");
      if (data_size && std::memcmp(data, bytes.data() + offset, data_size) != 0)
        bug("blob bytes are not the shard's");
      check_dense(ds, kind, i, npy_kinds.count(kind) > 0, data, data_size, width, height);
    }
  if (nb == 0) return;

  // A few images decoded at their own size and resized; then a BatchLoader over them.
  std::vector<int64_t> batch;
  for (size_t i = 0; i < visit && batch.size() < size_t(kMaxDecodes); ++i) {
    int32_t w = 0, hh = 0;
    if (!ok_or_data(tarmac_decoded_size(ds, int64_t(i), &w, &hh), "decoded_size")) continue;
    if (w <= 0 || hh <= 0) bug("decoded_size is not positive");
    if (int64_t(w) * hh > kMaxDecodePixels) continue;
    std::vector<uint8_t> px(size_t(w) * size_t(hh) * 3);
    ok_or_data(tarmac_decode(ds, int64_t(i), px.data(), px.size(), w, hh, 0), "decode");
    std::vector<uint8_t> small(8 * 8 * 3);
    ok_or_data(tarmac_decode(ds, int64_t(i), small.data(), small.size(), 8, 8, 1),
               "decode resized");
    // As stored (1 or 3 channels), then as grey (--channels 1|keep datasets, or converted).
    int32_t c = 0;
    if (ok_or_data(tarmac_decoded_channels(ds, int64_t(i), &c), "decoded_channels") && c != 1 &&
        c != 3)
      bug("decoded_channels is neither 1 nor 3");
    std::vector<uint8_t> grey(size_t(w) * size_t(hh));
    ok_or_data(tarmac_decode_channels(ds, int64_t(i), grey.data(), grey.size(), w, hh, 1, 0),
               "decode grey");
    batch.push_back(int64_t(i));
  }
  if (batch.empty()) return;
  std::vector<const char*> names;
  for (const tarmac_field& f : fields)
    if (!f.ragged && f.sample_bytes <= 4096) names.push_back(f.name);
  tarmac_loader* loader = nullptr;
  if (int c = tarmac_loader_new(ds, 8, 8, 1, 2, names.data(), names.size(), &loader))
    bug("loader_new", c);
  std::vector<uint8_t> images(batch.size() * 8 * 8 * 3);
  std::vector<std::vector<uint8_t>> labels;
  std::vector<void*> label_ptrs;
  std::vector<size_t> label_sizes;
  for (const char* name : names) {
    uint64_t bytes = 0;
    for (const tarmac_field& f : fields)
      if (f.name == name) bytes = f.sample_bytes;
    labels.emplace_back(batch.size() * bytes);
    label_sizes.push_back(labels.back().size());
  }
  for (auto& l : labels) label_ptrs.push_back(l.data());
  if (int c = tarmac_loader_start(loader, batch.data(), batch.size(), images.data(), images.size(),
                                  label_ptrs.data(), label_sizes.data()))
    bug("loader_start", c);
  ok_or_data(tarmac_loader_wait(loader), "loader_wait");
  tarmac_loader_free(loader);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // As in fuzz_image_decode: OpenCV's own pixel limit (TIFF) as small as the one used here.
  ::setenv("OPENCV_IO_MAX_IMAGE_PIXELS", "1048576", 1);
  const fs::path tmp = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  g_dir = tmp / ("tarmac-fuzz-dataset-" + std::to_string(::getpid()));
  fs::remove_all(g_dir);
  fs::create_directories(g_dir);
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  Files files;
  files.labels = take_part(in);
  files.by_name["labels.safetensors"] = files.labels;
  for (const auto& e : fs::directory_iterator(g_dir)) fs::remove(e.path());
  write_file(g_dir / "labels.safetensors", files.labels);
  for (size_t k = 0; k < kMaxShards && !in.empty(); ++k) {
    const auto part = take_part(in);
    files.by_name[shard_file(k)] = part;
    write_file(g_dir / shard_file(k), part);
  }

  tarmac_dataset* ds = nullptr;
  const int code = tarmac_open(g_dir.c_str(), &ds);
  if (code != TARMAC_OK) {
    if (code != TARMAC_E_IO && code != TARMAC_E_PARSE) bug("open", code);
    return 0;
  }
  check_opened(ds, files);
  tarmac_close(ds);
  return 0;
}
