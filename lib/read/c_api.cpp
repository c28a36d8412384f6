// The C ABI over Dataset, BatchLoader and partition_indices: exceptions become codes.
#include "read/c_api.h"

#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "format/names.h"
#include "read/batch_loader.h"
#include "read/cached_dataset.h"
#include "read/dataset.h"
#include "read/derived_column.h"
#include "read/partition.h"
#include "remote/url.h"

struct tarmac_dataset {
  tarmac::Dataset ds;
};
struct tarmac_loader {
  tarmac::BatchLoader loader;
};

namespace {

using tarmac::ArgumentError;
using tarmac::IndexError;
using tarmac::ReadErrorCode;

// The C ABI's codes are the library's, one to one.
static_assert(TARMAC_E_INVALID == static_cast<int>(ReadErrorCode::Invalid));
static_assert(TARMAC_E_RANGE == static_cast<int>(ReadErrorCode::Range));
static_assert(TARMAC_E_IO == static_cast<int>(ReadErrorCode::Io));
static_assert(TARMAC_E_PARSE == static_cast<int>(ReadErrorCode::Parse));
static_assert(TARMAC_E_DATA == static_cast<int>(ReadErrorCode::Data));
static_assert(TARMAC_E_INTERNAL == static_cast<int>(ReadErrorCode::Internal));
static_assert(TARMAC_NUMERIC == static_cast<int>(tarmac::FieldKind::Numeric));
static_assert(TARMAC_STRING == static_cast<int>(tarmac::FieldKind::String));
static_assert(TARMAC_JSON == static_cast<int>(tarmac::FieldKind::Json));
// dtype codes: BOOL U8 I8 U16 I16 U32 I32 U64 I64 F16 BF16 F32 F64 (0..12), as c_api.h says.
static_assert(
    static_cast<int>(tarmac::DType::BOOL) == 0 && static_cast<int>(tarmac::DType::U8) == 1 &&
    static_cast<int>(tarmac::DType::I8) == 2 && static_cast<int>(tarmac::DType::U16) == 3 &&
    static_cast<int>(tarmac::DType::I16) == 4 && static_cast<int>(tarmac::DType::U32) == 5 &&
    static_cast<int>(tarmac::DType::I32) == 6 && static_cast<int>(tarmac::DType::U64) == 7 &&
    static_cast<int>(tarmac::DType::I64) == 8 && static_cast<int>(tarmac::DType::F16) == 9 &&
    static_cast<int>(tarmac::DType::BF16) == 10 && static_cast<int>(tarmac::DType::F32) == 11 &&
    static_cast<int>(tarmac::DType::F64) == 12);

thread_local std::string g_error;

int set_error(int code, const char* what) {
  g_error = what;
  return code;
}

template <class F>
int guarded(F&& f) {
  try {
    f();
    g_error.clear();
    return TARMAC_OK;
  } catch (const IndexError& e) {
    return set_error(TARMAC_E_RANGE, e.what());
  } catch (const ArgumentError& e) {
    return set_error(TARMAC_E_INVALID, e.what());
  } catch (const std::out_of_range& e) {  // from the standard library: an index all the same
    return set_error(TARMAC_E_RANGE, e.what());
  } catch (const std::invalid_argument& e) {
    return set_error(TARMAC_E_INVALID, e.what());
  } catch (const tarmac::FatalError& e) {
    return set_error(TARMAC_E_IO, e.what());
  } catch (const tarmac::ParseError& e) {
    return set_error(TARMAC_E_PARSE, e.what());
  } catch (const tarmac::DataError& e) {
    return set_error(TARMAC_E_DATA, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(TARMAC_E_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return set_error(TARMAC_E_INTERNAL, e.what());
  }
}

void need(const void* p, const char* what) {
  if (p == nullptr) throw ArgumentError(std::string(what) + " must not be NULL");
}

size_t index(int64_t i) {
  if (i < 0) throw IndexError("sample index " + std::to_string(i) + " is negative");
  return static_cast<size_t>(i);
}

void fill(const tarmac::TensorView& v, const int64_t* offsets, tarmac_tensor* out) {
  *out = {};
  out->dtype = static_cast<int32_t>(v.dtype);
  out->ndim = static_cast<int32_t>(v.shape.ndim);
  for (size_t k = 0; k < v.shape.ndim; ++k) out->shape[k] = v.shape[k];
  out->data = v.bytes.data();
  out->nbytes = v.bytes.size();
  out->offsets = offsets;
}

}  // namespace

extern "C" {

int tarmac_api_version(void) {
  return TARMAC_C_API_VERSION;
}

const char* tarmac_last_error(void) {
  return g_error.c_str();
}

const char* tarmac_dtype_name(int32_t dtype) {
  if (dtype < 0 || dtype > static_cast<int32_t>(tarmac::DType::F64)) return nullptr;
  return tarmac::dtype_name(static_cast<tarmac::DType>(dtype)).data();
}

int tarmac_open(const char* dir, tarmac_dataset** out) {
  return guarded([&] {
    need(dir, "dir");
    need(out, "out");
    if (tarmac::remote::is_remote(dir))
      throw ArgumentError(std::string("'") + dir +
                          "' is in object storage: open it with tarmac_open_cached and a cache "
                          "folder (Python: tarmac.Dataset(url, cache=DIR))");
    *out = new tarmac_dataset{tarmac::Dataset(dir)};
  });
}

int tarmac_open_cached(const char* url, const char* cache_dir, uint64_t cache_size,
                       tarmac_dataset** out) {
  return guarded([&] {
    need(url, "url");
    need(cache_dir, "cache_dir");
    need(out, "out");
    if (!*cache_dir) throw ArgumentError("tarmac_open_cached: cache_dir is empty");
    *out = new tarmac_dataset{tarmac::open_cached(
        url, cache_dir, cache_size, tarmac::remote::RemoteConfig::from_environment())};
  });
}

void tarmac_close(tarmac_dataset* ds) {
  delete ds;
}

int64_t tarmac_size(const tarmac_dataset* ds) {
  return ds ? static_cast<int64_t>(ds->ds.size()) : -1;
}

const char* tarmac_metadata(const tarmac_dataset* ds, const char* key) {
  if (!ds || !key) return nullptr;
  const auto& m = ds->ds.metadata();
  auto it = m.find(key);
  return it == m.end() ? nullptr : it->second.c_str();
}

int tarmac_num_fields(const tarmac_dataset* ds, int64_t* out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    *out = static_cast<int64_t>(ds->ds.fields().size());
  });
}

int tarmac_field_info(const tarmac_dataset* ds, int64_t k, tarmac_field* out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    const auto& fields = ds->ds.fields();
    if (k < 0 || static_cast<size_t>(k) >= fields.size())
      throw IndexError("field index out of range");
    const tarmac::FieldSpec& f = fields[static_cast<size_t>(k)];
    *out = {};
    out->name = f.name.c_str();
    out->kind = static_cast<int32_t>(f.kind);
    out->dtype = static_cast<int32_t>(f.dtype);
    out->ragged = f.ragged;
    out->ndim = static_cast<int32_t>(f.shape.size());
    for (size_t d = 0; d < f.shape.size(); ++d) out->shape[d] = f.shape[d];
    out->sample_bytes = f.sample_bytes();
    out->nullable = f.nullable;
  });
}

int tarmac_has_value(const tarmac_dataset* ds, const char* name, int64_t i, int32_t* out) {
  return guarded([&] {
    need(ds, "ds");
    need(name, "name");
    need(out, "out");
    *out = ds->ds.has_value(name, index(i)) ? 1 : 0;
  });
}

int tarmac_num_blob_kinds(const tarmac_dataset* ds, int64_t* out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    *out = static_cast<int64_t>(ds->ds.blob_kinds().size());
  });
}

int tarmac_blob_kind(const tarmac_dataset* ds, int64_t k, const char** out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    const auto& kinds = ds->ds.blob_kinds();
    if (k < 0 || static_cast<size_t>(k) >= kinds.size())
      throw IndexError("blob kind index out of range");
    *out = kinds[static_cast<size_t>(k)].c_str();
  });
}

int tarmac_key(const tarmac_dataset* ds, int64_t i, const char** data, size_t* size) {
  return guarded([&] {
    need(ds, "ds");
    need(data, "data");
    need(size, "size");
    const std::string_view k = ds->ds.key(index(i));
    *data = k.data();
    *size = k.size();
  });
}

int tarmac_blob(const tarmac_dataset* ds, int64_t i, const char* kind, const uint8_t** data,
                size_t* size) {
  return guarded([&] {
    need(ds, "ds");
    need(data, "data");
    need(size, "size");
    const auto b = ds->ds.blob(index(i), kind ? kind : tarmac::format::kImageBlob);
    *data = b.data();
    *size = b.size();
  });
}

int tarmac_num_shards(const tarmac_dataset* ds, int64_t* out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    *out = static_cast<int64_t>(ds->ds.shard_names().size());
  });
}

int tarmac_shard(const tarmac_dataset* ds, int64_t k, const uint8_t** data, size_t* size) {
  return guarded([&] {
    need(ds, "ds");
    need(data, "data");
    need(size, "size");
    if (k < 0 || static_cast<uint64_t>(k) >= ds->ds.shard_names().size())
      throw IndexError("shard " + std::to_string(k) + " out of range for " +
                       std::to_string(ds->ds.shard_names().size()) + " shards");
    const auto b = ds->ds.shard_bytes(static_cast<size_t>(k));
    *data = b.data();
    *size = b.size();
  });
}

int tarmac_blob_ref(const tarmac_dataset* ds, int64_t i, const char* kind, int32_t* shard,
                    int64_t* offset, int64_t* size, uint32_t* crc32, int32_t* width,
                    int32_t* height) {
  return guarded([&] {
    need(ds, "ds");
    const tarmac::BlobRef r = ds->ds.blob_ref(index(i), kind ? kind : tarmac::format::kImageBlob);
    if (shard) *shard = r.shard;
    if (offset) *offset = r.offset;
    if (size) *size = r.size;
    if (crc32) *crc32 = r.crc32;
    if (width) *width = r.width;
    if (height) *height = r.height;
  });
}

int tarmac_value(const tarmac_dataset* ds, const char* name, int64_t i, tarmac_tensor* out) {
  return guarded([&] {
    need(ds, "ds");
    need(name, "name");
    need(out, "out");
    fill(ds->ds.value(name, index(i)), nullptr, out);
  });
}

int tarmac_dense(const tarmac_dataset* ds, int64_t i, const char* kind, tarmac_tensor* out) {
  return guarded([&] {
    need(ds, "ds");
    need(kind, "kind");
    need(out, "out");
    fill(ds->ds.dense_array(index(i), kind), nullptr, out);
  });
}

int tarmac_column(const tarmac_dataset* ds, const char* name, tarmac_tensor* out) {
  return guarded([&] {
    need(ds, "ds");
    need(name, "name");
    need(out, "out");
    const tarmac::Column c = ds->ds.column(name);
    fill(c.values, c.offsets.empty() ? nullptr : c.offsets.data(), out);
  });
}

int tarmac_num_derived(const tarmac_dataset* ds, int64_t* out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    *out = static_cast<int64_t>(ds->ds.derived_names().size());
  });
}

int tarmac_derived_name(const tarmac_dataset* ds, int64_t k, const char** out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    const auto& names = ds->ds.derived_names();
    if (k < 0 || static_cast<size_t>(k) >= names.size())
      throw IndexError("derived column " + std::to_string(k) + " of " +
                       std::to_string(names.size()));
    *out = names[static_cast<size_t>(k)].c_str();
  });
}

int tarmac_derived_value(const tarmac_dataset* ds, const char* name, int64_t i,
                         tarmac_tensor* out) {
  return guarded([&] {
    need(ds, "ds");
    need(name, "name");
    need(out, "out");
    fill(ds->ds.derived(name).value(index(i)), nullptr, out);
  });
}

int tarmac_derived_column(const tarmac_dataset* ds, const char* name, tarmac_tensor* out,
                          tarmac_tensor* shapes) {
  return guarded([&] {
    need(ds, "ds");
    need(name, "name");
    need(out, "out");
    const tarmac::DerivedColumn& c = ds->ds.derived(name);
    fill(c.values(), c.uniform() ? nullptr : c.offsets().data(), out);
    if (shapes) {
      tarmac::TensorView v;
      v.dtype = tarmac::DType::I64;
      v.shape.ndim = 2;
      v.shape.dims[0] = static_cast<int64_t>(ds->ds.size());
      v.shape.dims[1] = static_cast<int64_t>(c.ndim());
      v.bytes = {reinterpret_cast<const uint8_t*>(c.shapes().data()), c.shapes().size_bytes()};
      fill(v, nullptr, shapes);
    }
  });
}

int tarmac_decoded_size(const tarmac_dataset* ds, int64_t i, int32_t* width, int32_t* height) {
  return guarded([&] {
    need(ds, "ds");
    need(width, "width");
    need(height, "height");
    const auto [w, h] = ds->ds.decoded_size(index(i));
    *width = w;
    *height = h;
  });
}

int tarmac_decode(const tarmac_dataset* ds, int64_t i, uint8_t* out, size_t size, int32_t width,
                  int32_t height, int resize) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    ds->ds.decode_into(index(i), {out, size}, width, height, resize != 0);
  });
}

int tarmac_decoded_channels(const tarmac_dataset* ds, int64_t i, int32_t* channels) {
  return guarded([&] {
    need(ds, "ds");
    need(channels, "channels");
    *channels = ds->ds.decoded_channels(index(i));
  });
}

int tarmac_decode_channels(const tarmac_dataset* ds, int64_t i, uint8_t* out, size_t size,
                           int32_t width, int32_t height, int32_t channels, int resize) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    ds->ds.decode_into(index(i), {out, size}, width, height, resize != 0, channels);
  });
}

int tarmac_partition_size(uint64_t n, uint64_t rank, uint64_t world, int drop_last, uint64_t* out) {
  return guarded([&] {
    need(out, "out");
    tarmac::PartitionOptions o;
    o.rank = rank;
    o.world = world;
    o.drop_last = drop_last != 0;
    *out = tarmac::partition_size(n, o);
  });
}

int tarmac_indices(uint64_t n, uint64_t rank, uint64_t world, uint64_t seed, uint64_t epoch,
                   int shuffle, int drop_last, int64_t* out, size_t capacity) {
  return guarded([&] {
    const tarmac::PartitionOptions o{rank, world, seed, epoch, shuffle != 0, drop_last != 0};
    const auto idx = tarmac::partition_indices(n, o);
    if (capacity < idx.size())
      throw ArgumentError("indices buffer holds " + std::to_string(capacity) + ", " +
                          std::to_string(idx.size()) + " needed");
    if (!idx.empty()) {
      need(out, "out");
      std::memcpy(out, idx.data(), idx.size() * sizeof(int64_t));
    }
  });
}

int tarmac_loader_new(const tarmac_dataset* ds, int32_t width, int32_t height, int resize,
                      int32_t threads, const char* const* fields, size_t nfields,
                      tarmac_loader** out) {
  return tarmac_loader_new_channels(ds, width, height, 3, resize, threads, fields, nfields, out);
}

int tarmac_loader_new_channels(const tarmac_dataset* ds, int32_t width, int32_t height,
                               int32_t channels, int resize, int32_t threads,
                               const char* const* fields, size_t nfields, tarmac_loader** out) {
  return guarded([&] {
    need(ds, "ds");
    need(out, "out");
    tarmac::BatchOptions o;
    o.width = width;
    o.height = height;
    o.channels = channels;
    o.resize = resize != 0;
    o.threads = threads;
    if (nfields) need(fields, "fields");
    for (size_t k = 0; k < nfields; ++k) {
      need(fields[k], "fields[k]");
      o.fields.emplace_back(fields[k]);
    }
    *out = new tarmac_loader{tarmac::BatchLoader(ds->ds, std::move(o))};
  });
}

void tarmac_loader_free(tarmac_loader* loader) {
  delete loader;
}

int tarmac_loader_new_augment(const tarmac_dataset* ds, const tarmac_augment* aug, int32_t channels,
                              int32_t threads, const char* const* fields, size_t nfields,
                              tarmac_loader** out) {
  return guarded([&] {
    need(ds, "ds");
    need(aug, "aug");
    need(out, "out");
    tarmac::BatchOptions o;
    o.channels = channels;
    o.threads = threads;
    if (nfields) need(fields, "fields");
    for (size_t k = 0; k < nfields; ++k) {
      need(fields[k], "fields[k]");
      o.fields.emplace_back(fields[k]);
    }
    tarmac::Augment a;
    a.width = aug->width;
    a.height = aug->height;
    a.flip = aug->flip;
    if (aug->nflip_pairs) need(aug->flip_pairs, "aug->flip_pairs");
    for (size_t k = 0; k < aug->nflip_pairs; ++k)
      a.flip_pairs.emplace_back(aug->flip_pairs[2 * k], aug->flip_pairs[2 * k + 1]);
    a.rotate = aug->rotate;
    if (aug->scale_min != 0 || aug->scale_max != 0) {
      a.scale_min = aug->scale_min;
      a.scale_max = aug->scale_max;
    }
    a.translate = aug->translate;
    a.crop = aug->crop != 0;
    if (a.crop) {
      a.crop_min = aug->crop_min;
      a.crop_max = aug->crop_max;
    }
    if (aug->ratio_min != 0 || aug->ratio_max != 0) {
      a.ratio_min = aug->ratio_min;
      a.ratio_max = aug->ratio_max;
    }
    a.fill = aug->fill;
    auto names = [](const char* const* v, size_t n, const char* what) {
      std::vector<std::string> out;
      for (size_t k = 0; k < n; ++k) {
        need(v[k], what);
        out.emplace_back(v[k]);
      }
      return out;
    };
    if (aug->points) o.points = names(aug->points, aug->npoints, "aug->points[k]");
    if (aug->boxes) o.boxes = names(aug->boxes, aug->nboxes, "aug->boxes[k]");
    o.augment = std::move(a);
    *out = new tarmac_loader{tarmac::BatchLoader(ds->ds, std::move(o))};
  });
}

// A loader's field k, asked for into `out`: both given, k in range.
static void need_field(const tarmac_loader* loader, size_t k, const void* out) {
  need(loader, "loader");
  need(out, "out");
  const size_t n = loader->loader.options().fields.size();
  if (k >= n) throw IndexError("loader field " + std::to_string(k) + " of " + std::to_string(n));
}

int tarmac_loader_field_bytes(const tarmac_loader* loader, size_t k, uint64_t* out) {
  return guarded([&] {
    need_field(loader, k, out);
    *out = loader->loader.field_bytes(k);
  });
}

int tarmac_loader_field_layout(const tarmac_loader* loader, size_t k, tarmac_tensor* out) {
  return guarded([&] {
    need_field(loader, k, out);
    fill(loader->loader.field_layout(k), nullptr, out);
    out->data = nullptr;
    out->nbytes = loader->loader.field_bytes(k);
  });
}

int tarmac_loader_start(tarmac_loader* loader, const int64_t* indices, size_t n, uint8_t* images,
                        size_t images_size, void* const* labels, const size_t* label_sizes) {
  return tarmac_loader_start_seeded(loader, 0, 0, indices, n, images, images_size, labels,
                                    label_sizes);
}

int tarmac_loader_start_seeded(tarmac_loader* loader, uint64_t seed, uint64_t epoch,
                               const int64_t* indices, size_t n, uint8_t* images,
                               size_t images_size, void* const* labels, const size_t* label_sizes) {
  return guarded([&] {
    need(loader, "loader");
    if (n) need(indices, "indices");
    tarmac::BatchBuffers b;
    b.images = {images, images ? images_size : 0};
    const size_t nf = loader->loader.options().fields.size();
    if (nf) {
      need(labels, "labels");
      need(label_sizes, "label_sizes");
    }
    for (size_t k = 0; k < nf; ++k)
      b.labels.emplace_back(static_cast<uint8_t*>(labels[k]), label_sizes[k]);
    loader->loader.start(std::vector<int64_t>(indices, indices + n), std::move(b), seed, epoch);
  });
}

int tarmac_loader_wait(tarmac_loader* loader) {
  return guarded([&] {
    need(loader, "loader");
    loader->loader.wait();
  });
}

}  // extern "C"
