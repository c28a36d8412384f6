// The merged annotation file (merge_internal.h): the parts' columns joined from their memory
// maps, converted to the merged schema's dtypes, ragged offsets rebased, blob records pointing
// into the renumbered shards, fields rendered as JSON text where reconcile says so.
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stop.h"
#include "common/version.h"
#include "format/layout.h"
#include "format/names.h"
#include "merge/merge_internal.h"
#include "write/column_store.h"
#include "write/safetensors_writer.h"

namespace tarmac::merge_detail {
namespace fs = std::filesystem;
using namespace format;

namespace {

constexpr uint64_t kChunk = 1 << 16;  // elements converted at a time

int64_t offset_at(const Part& p, const TensorInfo* t, uint64_t i) {
  int64_t v;
  std::memcpy(&v, p.a.file().bytes().data() + t->begin + i * 8, 8);
  return v;
}

// Writes `count` elements of dtype `from` at `src` as dtype `to`, in chunks.
void write_converted(ByteSink& sink, DType from, const uint8_t* src, uint64_t count, DType to) {
  if (from == to) {
    sink.write({src, count * dtype_size(from)});
    return;
  }
  std::vector<uint8_t> buf;
  for (uint64_t done = 0; done < count; done += kChunk) {
    const uint64_t n = std::min(kChunk, count - done);
    buf.clear();
    convert_elements(from, src + done * dtype_size(from), n, to, buf);
    sink.write(buf);
  }
}

// Writes int64 values produced by `value(i)` for i in [0, n), in chunks.
template <typename T, typename F>
void write_generated(ByteSink& sink, uint64_t n, F value) {
  std::vector<T> buf;
  buf.reserve(kChunk);
  for (uint64_t i = 0; i < n; ++i) {
    buf.push_back(value(i));
    if (buf.size() == kChunk || i + 1 == n) {
      sink.write({reinterpret_cast<const uint8_t*>(buf.data()), buf.size() * sizeof(T)});
      buf.clear();
    }
  }
}

// A ragged column's tensors in one part (keys too). `values` and `offsets` give the part's
// tensors; a null offsets tensor means the part stores the column with a fixed first axis of
// `fixed_rows`; null values, that the part lacks the column (a nullable field it never had).
struct Source {
  const TensorInfo* values;
  const TensorInfo* offsets;
  int64_t fixed_rows;
  Part::Render render = Part::Render::None;  // rows written as JSON text (reconcile)
  const TensorInfo* valid = nullptr;         // which rows hold a value, when rendered
};
using SourceOf = std::function<Source(const Part&)>;
using TensorOf = std::function<const TensorInfo*(const Part&)>;

// Row i of a rendered part as JSON text: "[]" for an empty list, a string quoted and
// escaped as nlohmann's dump writes it (what one run stores); nothing for a null.
std::string rendered_row(const Part& p, const Source& s, uint64_t i) {
  if (s.valid && tensor_bytes(p, s.valid)[i] == 0) return {};
  if (s.render == Part::Render::EmptyList) return "[]";
  const int64_t b = offset_at(p, s.offsets, i), e = offset_at(p, s.offsets, i + 1);
  const auto bytes = tensor_bytes(p, s.values);
  return json(std::string(reinterpret_cast<const char*>(bytes.data()) + b,
                          static_cast<size_t>(e - b)))
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

// A ragged column: values concatenated (converted to `dtype`), offsets rebased. A part
// without the column adds no rows.
void add_ragged_column(std::vector<TensorSpec>& t, const std::vector<const Part*>& parts,
                       uint64_t n, const std::string& name, DType dtype, std::vector<int64_t> inner,
                       const SourceOf& source) {
  int64_t total = 0;
  for (const auto& p : parts) {
    const Source s = source(*p);
    if (!s.values) continue;
    if (s.render != Part::Render::None) {
      for (uint64_t i = 0; i < p->a.size(); ++i)
        total += static_cast<int64_t>(rendered_row(*p, s, i).size());
      continue;
    }
    total += s.offsets ? s.values->shape[0] : static_cast<int64_t>(p->a.size()) * s.fixed_rows;
  }
  std::vector<int64_t> shape{total};
  shape.insert(shape.end(), inner.begin(), inner.end());
  t.push_back({values_tensor(name), dtype, shape, [&parts, source, dtype](ByteSink& sink) {
                 for (const auto& p : parts) {
                   const Source s = source(*p);
                   if (!s.values) continue;
                   if (s.render != Part::Render::None) {
                     for (uint64_t i = 0; i < p->a.size(); ++i) {
                       const std::string text = rendered_row(*p, s, i);
                       sink.write({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
                     }
                     continue;
                   }
                   const auto b = tensor_bytes(*p, s.values);
                   write_converted(sink, s.values->dtype, b.data(),
                                   b.size() / dtype_size(s.values->dtype), dtype);
                 }
               }});
  t.push_back({offsets_tensor(name),
               DType::I64,
               {static_cast<int64_t>(n) + 1},
               [&parts, source](ByteSink& sink) {
                 int64_t base = 0;
                 const int64_t zero = 0;
                 sink.write({reinterpret_cast<const uint8_t*>(&zero), 8});
                 for (const auto& p : parts) {
                   const Source s = source(*p);
                   const uint64_t np = p->a.size();
                   if (!s.values) {
                     write_generated<int64_t>(sink, np, [&](uint64_t) { return base; });
                     continue;
                   }
                   if (s.render != Part::Render::None) {
                     write_generated<int64_t>(sink, np, [&](uint64_t i) {
                       base += static_cast<int64_t>(rendered_row(*p, s, i).size());
                       return base;
                     });
                     continue;
                   }
                   write_generated<int64_t>(sink, np, [&](uint64_t i) {
                     return base + (s.offsets ? offset_at(*p, s.offsets, i + 1)
                                              : static_cast<int64_t>(i + 1) * s.fixed_rows);
                   });
                   base += s.offsets ? offset_at(*p, s.offsets, np)
                                     : static_cast<int64_t>(np) * s.fixed_rows;
                 }
               }});
}

// A fixed column: the parts' tensors concatenated (converted to `dtype`).
void add_fixed_column(std::vector<TensorSpec>& t, const std::vector<const Part*>& parts, uint64_t n,
                      const std::string& name, DType dtype, std::vector<int64_t> sample_shape,
                      const TensorOf& source) {
  std::vector<int64_t> shape{static_cast<int64_t>(n)};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  uint64_t sample_elements = 1;
  for (int64_t d : sample_shape) sample_elements *= static_cast<uint64_t>(d);
  t.push_back({name, dtype, shape, [&parts, source, dtype, sample_elements](ByteSink& sink) {
                 for (const auto& p : parts) {
                   const TensorInfo* ti = source(*p);
                   if (!ti) {  // a part without the column: zeros (its samples have no value)
                     const std::vector<uint8_t> zeros(sample_elements * dtype_size(dtype), 0);
                     for (uint64_t i = 0; i < p->a.size(); ++i) sink.write(zeros);
                     continue;
                   }
                   const auto b = tensor_bytes(*p, ti);
                   write_converted(sink, ti->dtype, b.data(), b.size() / dtype_size(ti->dtype),
                                   dtype);
                 }
               }});
}

// The affines and every blob kind's records; part p's shard s becomes shard_base[p] + s.
void add_blob_columns(std::vector<TensorSpec>& t, const std::vector<const Part*>& parts,
                      const std::vector<int32_t>& shard_base, uint64_t n) {
  const auto& kinds = parts[0]->a.blob_kinds();
  if (kinds.empty()) return;
  add_fixed_column(t, parts, n, kAffineColumn, DType::F64, {2, 3},
                   [](const Part& p) { return p.a.layout().affine; });
  for (size_t k = 0; k < kinds.size(); ++k) {
    for (size_t c = kBlobShard + 1; c < kNumBlobColumns; ++c)
      add_fixed_column(t, parts, n, blob_tensor(kinds[k], BlobColumn(c)), kBlobColumns[c].dtype, {},
                       [k, c](const Part& p) { return p.a.layout().blobs[k].columns[c]; });
    t.push_back({blob_tensor(kinds[k], kBlobShard),
                 DType::I32,
                 {static_cast<int64_t>(n)},
                 [&parts, &shard_base, k](ByteSink& sink) {
                   for (size_t p = 0; p < parts.size(); ++p) {
                     const TensorInfo* ti = parts[p]->a.layout().blobs[k].columns[kBlobShard];
                     const uint8_t* base = parts[p]->a.file().bytes().data() + ti->begin;
                     write_generated<int32_t>(sink, parts[p]->a.size(), [&](uint64_t i) {
                       int32_t v;
                       std::memcpy(&v, base + i * 4, 4);
                       return v + shard_base[p];
                     });
                   }
                 }});
  }
}

// The label fields' columns, in the merged schema: ragged or fixed, and NAME.valid for a
// nullable one.
void add_field_columns(std::vector<TensorSpec>& t, const std::vector<const Part*>& parts,
                       const std::vector<FieldSpec>& fields, uint64_t n) {
  for (const auto& f : fields) {
    const std::string name = f.name;
    if (f.ragged) {
      add_ragged_column(t, parts, n, name, f.dtype, f.inner_shape(), [name](const Part& p) {
        const FieldLayout* fi = field_of(p, name);
        if (!fi) return Source{nullptr, nullptr, 0};
        const auto r = p.render.find(name);
        return Source{fi->values, fi->spec.ragged ? fi->offsets : nullptr,
                      fi->spec.ragged ? 0 : fi->spec.shape[0],
                      r == p.render.end() ? Part::Render::None : r->second, fi->valid};
      });
    } else {
      add_fixed_column(t, parts, n, name, f.dtype, f.shape,
                       [name](const Part& p) -> const TensorInfo* {
                         const FieldLayout* fi = field_of(p, name);
                         return fi ? fi->values : nullptr;
                       });
    }
    if (!f.nullable) continue;
    // NAME.valid: the parts' masks; 1 for a part where the field was never null, 0 where the
    // part lacks it.
    t.push_back({valid_tensor(name),
                 DType::BOOL,
                 {static_cast<int64_t>(n)},
                 [&parts, name](ByteSink& sink) {
                   for (const auto& p : parts) {
                     const FieldLayout* fi = field_of(*p, name);
                     if (fi && fi->valid) {
                       sink.write(tensor_bytes(*p, fi->valid));
                     } else {
                       const std::vector<uint8_t> v(p->a.size(), fi ? 1 : 0);
                       sink.write(v);
                     }
                   }
                 }});
  }
}

}  // namespace

// The key column first, then the blobs' and the fields'.
std::vector<TensorSpec> merged_tensors(const std::vector<const Part*>& parts,
                                       const std::vector<FieldSpec>& fields,
                                       const std::vector<int32_t>& shard_base, uint64_t n) {
  std::vector<TensorSpec> t;
  add_ragged_column(t, parts, n, kKeyColumn, DType::U8, {}, [](const Part& p) {
    return Source{p.a.layout().key_values, p.a.layout().key_offsets, 0};
  });
  add_blob_columns(t, parts, shard_base, n);
  add_field_columns(t, parts, fields, n);
  return t;
}

// The encoding of blob kind k over all parts: theirs when they agree; otherwise "source" (magic
// bytes tell JPEG, PNG and WebP apart), which raw pixels cannot join; unknown when any part was
// written before blob_encodings existed.
std::optional<StoredEncoding> merged_encoding(const std::vector<const Part*>& parts, size_t k) {
  std::optional<StoredEncoding> e = parts[0]->a.layout().blobs[k].encoding;
  for (const auto& p : parts) {
    const auto pe = p->a.layout().blobs[k].encoding;
    if (!pe || !e) return std::nullopt;
    if (*pe == *e) continue;
    if (*pe == StoredEncoding::Npy || *e == StoredEncoding::Npy)
      throw FatalError("part '" + p->path + "' stores " + parts[0]->a.blob_kinds()[k] + " as " +
                       std::string(encoding_name(*pe)) + ", part '" + parts[0]->path + "' as " +
                       std::string(encoding_name(*e)) +
                       ": .npy arrays cannot be merged with images; convert the parts with the "
                       "same --dense");
    if (*pe == StoredEncoding::Raw || *e == StoredEncoding::Raw)
      throw FatalError("part '" + p->path + "' stores " + parts[0]->a.blob_kinds()[k] + " as " +
                       std::string(encoding_name(*pe)) + ", part '" + parts[0]->path + "' as " +
                       std::string(encoding_name(*e)) +
                       ": raw pixels cannot be merged with encoded images; convert the parts "
                       "with the same --format");
    e = StoredEncoding::Source;
  }
  return e;
}

// Writes the merged annotation file into the staging directory: the parts' columns joined,
// their blobs' records pointing into the renumbered shards. Returns its metadata.
std::map<std::string, std::string> write_merged_labels(const MergeOptions& o, const PartSet& set,
                                                       const PlacedShards& placed,
                                                       const fs::path& staging,
                                                       MergeResult& result) {
  const std::vector<const Part*>& parts = set.sampled;
  const auto& kinds = parts[0]->a.blob_kinds();
  LayoutMetadata lm;
  lm.num_samples = result.samples;
  lm.fields = set.fields;
  lm.shards = placed.names;
  lm.tool = std::string("tarmac ") + kVersion;
  lm.classes = set.all[0]->a.layout().classes;
  // A table's metadata (COCO's categories) is kept when every part has the same.
  lm.table = set.all[0]->a.layout().table;
  for (const auto& p : set.all)
    if (p->a.layout().table != lm.table) lm.table.reset();
  for (size_t k = 0; k < kinds.size(); ++k)
    lm.blobs.emplace_back(kinds[k], merged_encoding(parts, k));
  lm.mask_blobs = set.all[0]->a.layout().mask_blobs;  // the parts' options are the same
  std::map<std::string, std::string> meta = layout_metadata(lm);
  const fs::path labels = staging / kLabelsFile;
  throw_if_stopped(o.stop);
  write_safetensors(labels.string(), merged_tensors(parts, set.fields, placed.base, result.samples),
                    meta);
  result.annotation_bytes = fs::file_size(labels);
  return meta;
}

}  // namespace tarmac::merge_detail
