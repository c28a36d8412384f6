#include "merge/merge.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "check/annotation.h"
#include "common/error.h"
#include "common/version.h"
#include "format/json_object.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "write/column_store.h"
#include "write/file_util.h"
#include "write/manifest_file.h"
#include "write/output_lock.h"
#include "write/safetensors_writer.h"
#include "write/staging.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using check::Annotation;
using namespace format;

namespace {

constexpr uint64_t kChunk = 1 << 16;  // elements converted at a time

struct Part {  // NOLINT(bugprone-exception-escape): moved only while parts are read
  std::string path;
  Annotation a;
  format::Manifest manifest;  // empty when the part has none
  /// Fields null in every sample of this part: they say nothing of the field's kind, dtype or
  /// shape (a part's all-null field gets some kind there), so the merge treats the part as
  /// lacking them, as one run over all parts' samples would have typed them.
  std::set<std::string> null_fields;
  /// How this part's values of a field are written when its kind there is not the merge's
  /// (set by reconcile): as JSON text, the way one run over all samples stores them.
  enum class Render : uint8_t { None, JsonString, EmptyList };
  mutable std::map<std::string, Render> render;
};

// Whether part p's numeric field holds no element at all: every value an empty list (or
// null). Like an all-null field it says nothing of the field's kind or dtype.
bool only_empty_lists(const Part& p, const FieldLayout& f);

// Part p's field `name`, or null when the part lacks it or holds only nulls in it.
const FieldLayout* field_of(const Part& p, const std::string& name) {
  if (p.null_fields.count(name)) return nullptr;
  return p.a.layout().find_field(name);
}

std::span<const uint8_t> tensor_bytes(const Part& p, const TensorInfo* t) {
  return p.a.file().bytes().subspan(t->begin, t->end - t->begin);
}

bool only_empty_lists(const Part& p, const FieldLayout& f) {
  // (all [] in a part is stored there as a fixed shape [0], or ragged with no rows)
  return f.spec.kind == FieldKind::Numeric && !f.spec.shape.empty() && f.values &&
         f.values->end == f.values->begin && p.a.size() > 0;
}

// The part's fields whose NAME.valid is false in every sample.
std::set<std::string> all_null_fields(const Part& p) {
  std::set<std::string> names;
  for (const auto& f : p.a.fields()) {
    const FieldLayout* fl = p.a.layout().find_field(f.spec.name);
    if (!fl || !fl->valid || p.a.size() == 0) continue;
    const auto b = tensor_bytes(p, fl->valid);
    if (std::all_of(b.begin(), b.end(), [](uint8_t v) { return v == 0; }))
      names.insert(f.spec.name);
  }
  return names;
}

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

// Part `path`'s manifest; an empty one when it has none. Throws FatalError naming the part
// when its manifest is malformed (a wrong type, a shard named by a path).
format::Manifest read_part_manifest(const std::string& path) {
  try {
    return format::read_manifest(path).value_or(format::Manifest{});
  } catch (const ParseError& e) {
    throw FatalError("part '" + path + "': " + kManifestFile + ": " + e.what() +
                     " (run 'tarmac verify " + path + "')");
  }
}

std::vector<std::unique_ptr<Part>> open_parts(const std::vector<std::string>& paths) {
  std::vector<std::unique_ptr<Part>> parts;
  for (const auto& path : paths) {
    auto p = std::make_unique<Part>();
    p->path = path;
    std::vector<check::Problem> problems;
    std::error_code ec;
    if (!fs::exists(fs::path(path) / kLabelsFile, ec))
      throw FatalError("part '" + path + "' is not a tarmac dataset: no " + kLabelsFile);
    // What is merged is verified first: a damaged annotation file would otherwise be copied
    // into the merge, whose new labels_crc32 would then vouch for it (docs/reliability.md).
    verified_labels_crc32(path, "part");
    if (!p->a.open(path, true, problems) || !problems.empty()) {
      const auto& pr = problems.front();
      throw FatalError("part '" + path + "' is not a valid dataset: " + pr.file + ": " +
                       (pr.sample.empty() ? "" : "sample '" + pr.sample + "': ") + pr.what +
                       " (run 'tarmac verify " + path + "')");
    }
    p->manifest = read_part_manifest(path);
    p->null_fields = all_null_fields(*p);
    parts.push_back(std::move(p));
  }
  return parts;
}

// The output schema: the same fields in every part; dtypes promoted; a field that is ragged
// in one part, or whose first axis differs between parts, becomes ragged (as convert would
// make it when the field comes from JSON or is ragged anyway).
std::vector<FieldSpec> reconcile(const std::vector<const Part*>& parts) {
  // The union of the parts' fields, in order of first appearance: a field some part lacks
  // (its samples never had it: an optional field) is nullable in the merge.
  std::vector<std::string> names;
  for (const auto& p : parts)
    for (const auto& f : p->a.fields())
      if (std::find(names.begin(), names.end(), f.spec.name) == names.end())
        names.push_back(f.spec.name);
  std::vector<FieldSpec> out;
  for (const auto& name : names) {
    // The kind one run would give: that of the parts whose values say something (not only
    // nulls or empty lists); strings and JSON values together are JSON, and a string beside
    // an empty list is too (one run stores each as JSON text then).
    std::set<FieldKind> kinds;
    bool empty_lists = false;
    for (const auto& p : parts)
      if (const FieldLayout* fl = field_of(*p, name)) {
        if (only_empty_lists(*p, *fl))
          empty_lists = true;
        else
          kinds.insert(fl->spec.kind);
      }
    const bool to_json = kinds.count(FieldKind::Json) ||
                         (kinds.count(FieldKind::String) && (kinds.size() > 1 || empty_lists));
    const bool to_json_ok = to_json && !kinds.count(FieldKind::Numeric);
    std::optional<FieldSpec> o;
    const Part* shaped_by = nullptr;
    bool lacked = false;        // a part before `o` was set lacks the field
    bool beside_empty = false;  // some part holds only empty lists beside numbers
    bool empty_nullable = false;
    for (const auto& p : parts) {
      const FieldLayout* fl = field_of(*p, name);
      if (!fl) {
        lacked = true;
        if (o) o->nullable = true;
        continue;
      }
      FieldSpec f = fl->spec;
      p->render.erase(name);
      if (to_json_ok && f.kind != FieldKind::Json) {
        // Written as JSON text: "[]" for each empty list, each string quoted and escaped.
        p->render[name] =
            f.kind == FieldKind::String ? Part::Render::JsonString : Part::Render::EmptyList;
        f.kind = FieldKind::Json;
        f.dtype = DType::U8;
        f.shape = {-1};
        f.ragged = true;
      } else if (!kinds.empty() && only_empty_lists(*p, *fl)) {
        // Empty lists beside numbers: no dtype of their own; their rows stay empty.
        beside_empty = true;
        empty_nullable = empty_nullable || f.nullable;
        continue;
      }
      if (!o) {
        o = f;
        o->nullable = f.nullable || lacked;
        shaped_by = p;
        continue;
      }
      auto incompatible = [&](const std::string& here, const std::string& there) {
        return FatalError("field '" + name + "' is " + here + " in part '" + shaped_by->path +
                          "' but " + there + " in part '" + p->path +
                          "'; the parts cannot be merged");
      };
      if (f.kind != o->kind)  // numbers in one part, other JSON values in another
        throw FatalError("field '" + name + "' is of kind " + std::string(kind_name(o->kind)) +
                         " in part '" + shaped_by->path + "' but of kind " +
                         std::string(kind_name(f.kind)) + " in part '" + p->path +
                         "'; the parts cannot be merged: one run over all their inputs keeps "
                         "such a field as JSON text (convert the inputs in one run)");
      if (o->kind == FieldKind::Numeric) o->dtype = promote(o->dtype, f.dtype);
      if (f.shape.size() != o->shape.size() ||
          !std::equal(f.shape.begin() + (f.shape.empty() ? 0 : 1), f.shape.end(),
                      o->shape.begin() + (o->shape.empty() ? 0 : 1)))
        throw incompatible("of shape " + shape_text(o->shape), "of shape " + shape_text(f.shape));
      if (!o->shape.empty() && (f.ragged || o->ragged || f.shape[0] != o->shape[0])) {
        if (!o->ragged && !f.ragged && !ragged_by_source(o->source))
          throw FatalError("field '" + name + "' has shape " + shape_text(o->shape) + " in part '" +
                           shaped_by->path + "' but " + shape_text(f.shape) + " in part '" +
                           p->path + "'; convert every part with --ragged " + name);
        o->ragged = true;
        o->shape[0] = -1;
      }
      o->nullable = o->nullable || f.nullable;
      shaped_by = p;
    }
    if (o && beside_empty) {
      o->nullable = o->nullable || empty_nullable;
      if (!o->shape.empty()) {  // [] beside fixed-length lists: ragged, as one run makes it
        o->ragged = true;
        o->shape[0] = -1;
      }
    }
    if (!o) {  // null in every sample of every part: typed as the first part holding it
      for (const auto& p : parts)
        if (const FieldLayout* fl = p->a.layout().find_field(name); fl && !o) o = fl->spec;
      o->nullable = true;
    }
    out.push_back(std::move(*o));
  }
  return out;
}

// A key present twice: FatalError naming the key and both parts.
void check_unique_keys(const std::vector<const Part*>& parts) {
  struct Ref {
    uint64_t hash;
    uint32_t part;
    uint64_t index;
  };
  std::vector<Ref> refs;
  for (uint32_t p = 0; p < parts.size(); ++p)
    for (uint64_t i = 0; i < parts[p]->a.size(); ++i)
      refs.push_back({std::hash<std::string>{}(parts[p]->a.key(i)), p, i});
  std::sort(refs.begin(), refs.end(), [](const Ref& x, const Ref& y) {
    return std::tie(x.hash, x.part, x.index) < std::tie(y.hash, y.part, y.index);
  });
  for (size_t j = 1; j < refs.size(); ++j) {
    const Ref &x = refs[j - 1], &y = refs[j];
    if (x.hash != y.hash) continue;
    const std::string key = parts[x.part]->a.key(x.index);
    if (key == parts[y.part]->a.key(y.index))
      throw FatalError("key '" + key + "' is in part '" + parts[x.part]->path + "' (sample #" +
                       std::to_string(x.index) + ") and in part '" + parts[y.part]->path +
                       "' (sample #" + std::to_string(y.index) +
                       "): keys must be unique; were the same inputs converted twice?");
  }
}

// The tensors of the merged annotation file, filled from the parts' memory maps.
std::vector<TensorSpec> merged_tensors(const std::vector<const Part*>& parts,
                                       const std::vector<FieldSpec>& fields,
                                       const std::vector<int32_t>& shard_base, uint64_t n) {
  std::vector<TensorSpec> t;
  const auto n64 = static_cast<int64_t>(n);
  // A ragged column (keys too): values concatenated (converted), offsets rebased. `values`
  // and `offsets` give a part's tensors; a null offsets tensor means the part stores the
  // column with a fixed first axis of `fixed_rows`.
  struct Source {
    const TensorInfo* values;
    const TensorInfo* offsets;
    int64_t fixed_rows;
    Part::Render render = Part::Render::None;  // rows written as JSON text (reconcile)
    const TensorInfo* valid = nullptr;         // which rows hold a value, when rendered
  };
  // Row i of a rendered part as JSON text: "[]" for an empty list, a string quoted and
  // escaped as nlohmann's dump writes it (what one run stores); nothing for a null.
  const auto rendered_row = [](const Part& p, const Source& s, uint64_t i) -> std::string {
    if (s.valid && tensor_bytes(p, s.valid)[i] == 0) return {};
    if (s.render == Part::Render::EmptyList) return "[]";
    const int64_t b = offset_at(p, s.offsets, i), e = offset_at(p, s.offsets, i + 1);
    const auto bytes = tensor_bytes(p, s.values);
    return json(std::string(reinterpret_cast<const char*>(bytes.data()) + b,
                            static_cast<size_t>(e - b)))
        .dump(-1, ' ', false, json::error_handler_t::replace);
  };
  auto ragged = [&](const std::string& name, DType dtype, std::vector<int64_t> inner,
                    const std::function<Source(const Part&)>& source) {
    // A part without the column (a nullable field it never had) adds no rows.
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
    t.push_back(
        {values_tensor(name), dtype, shape, [&parts, source, dtype, rendered_row](ByteSink& sink) {
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
                 {n64 + 1},
                 [&parts, source, rendered_row](ByteSink& sink) {
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
  };
  // A fixed column: the parts' tensors concatenated (converted to `dtype`).
  auto fixed = [&](const std::string& name, DType dtype, std::vector<int64_t> sample_shape,
                   const std::function<const TensorInfo*(const Part&)>& source) {
    std::vector<int64_t> shape{n64};
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
  };

  ragged(kKeyColumn, DType::U8, {}, [](const Part& p) {
    return Source{p.a.layout().key_values, p.a.layout().key_offsets, 0};
  });
  const auto& kinds = parts[0]->a.blob_kinds();
  if (!kinds.empty()) {
    fixed(kAffineColumn, DType::F64, {2, 3}, [](const Part& p) { return p.a.layout().affine; });
    for (size_t k = 0; k < kinds.size(); ++k) {
      for (size_t c = kBlobShard + 1; c < kNumBlobColumns; ++c)
        fixed(blob_tensor(kinds[k], BlobColumn(c)), kBlobColumns[c].dtype, {},
              [k, c](const Part& p) { return p.a.layout().blobs[k].columns[c]; });
      // Shard indices are renumbered: part p's shard s becomes shard_base[p] + s.
      t.push_back({blob_tensor(kinds[k], kBlobShard),
                   DType::I32,
                   {n64},
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
  for (const auto& f : fields) {
    const std::string name = f.name;
    if (f.ragged) {
      ragged(name, f.dtype, f.inner_shape(), [name](const Part& p) {
        const FieldLayout* fi = field_of(p, name);
        if (!fi) return Source{nullptr, nullptr, 0};
        const auto r = p.render.find(name);
        return Source{fi->values, fi->spec.ragged ? fi->offsets : nullptr,
                      fi->spec.ragged ? 0 : fi->spec.shape[0],
                      r == p.render.end() ? Part::Render::None : r->second, fi->valid};
      });
    } else {
      fixed(name, f.dtype, f.shape, [name](const Part& p) -> const TensorInfo* {
        const FieldLayout* fi = field_of(p, name);
        return fi ? fi->values : nullptr;
      });
    }
    if (!f.nullable) continue;
    // NAME.valid: the parts' masks; 1 for a part where the field was never null, 0 where the
    // part lacks it.
    t.push_back({valid_tensor(name), DType::BOOL, {n64}, [&parts, name](ByteSink& sink) {
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
  return t;
}

// --classes-from-dirs: a part's `cls` ids index its class list, so parts whose lists differ
// (converted from other inputs) would give one id two meanings. Refused, naming the first
// difference.
void check_same_classes(const std::vector<std::unique_ptr<Part>>& parts) {
  const auto& first = parts[0]->a.layout().classes;
  for (const auto& p : parts) {
    const auto& c = p->a.layout().classes;
    if (c == first) continue;
    std::string diff;
    if (!c || !first) {
      diff = "one has class names (--classes-from-dirs), the other none";
    } else {
      size_t i = 0;
      while (i < c->size() && i < first->size() && (*c)[i] == (*first)[i]) ++i;
      diff = std::to_string(c->size()) + " classes against " + std::to_string(first->size()) +
             "; class " + std::to_string(i) + " is " +
             (i < c->size() ? "'" + (*c)[i] + "'" : "absent") + " against " +
             (i < first->size() ? "'" + (*first)[i] + "'" : "absent");
    }
    throw FatalError("part '" + p->path +
                     "' numbers its classes by other class folders than part '" + parts[0]->path +
                     "' (" + diff +
                     "), so one class id would name two classes; convert every part with the same "
                     "inputs (each part's pre-pass reads them all)");
  }
}

// The entries of a part's manifest list (`inputs`, `skipped`, `ignored`, `duplicates`) joined
// into the merge's, each once: parts of one input split by samples (--shard I/N) each read
// every input, so each lists the same input, ignored member or unreadable archive; one run
// lists it once. `seen` holds the entries' texts.
void append_once(json& to, const json& from, std::set<std::string>& seen) {
  for (const auto& e : from)
    if (seen.insert(e.dump()).second) to.push_back(e);
}
void append_once(std::vector<format::ProvenanceEntry>& to,
                 const std::vector<format::ProvenanceEntry>& from, std::set<std::string>& seen) {
  for (const auto& e : from)
    if (seen.insert(format::to_json(e).dump()).second) to.push_back(e);
}

// Places part shard `from` in the staging directory as `to`: a hard link, or a copy. Only a
// part's own regular file: a symbolic link could bring any file of the machine into the
// dataset (a hard link to the link itself, or a copy of what it points to). The placed file
// is checked again (regular, the size the part's annotation file needs), so that a file
// swapped for a link in between is caught too.
bool place_shard(const std::string& part, const fs::path& from, const fs::path& to, bool copy,
                 uint64_t needed) {
  std::error_code ec;
  const auto refuse = [&](const std::string& why) {
    return FatalError("part '" + part + "': shard '" + from.filename().string() + "' " + why +
                      "; the merge stopped and wrote nothing (run 'tarmac verify " + part + "')");
  };
  if (fs::symlink_status(from, ec).type() != fs::file_type::regular)
    throw refuse(
        "is not a regular file (a symbolic link, or missing): merge takes only the parts' own "
        "files; put the file itself there, or convert the part again");
  bool linked = false;
  if (!copy) {
    fs::create_hard_link(from, to, ec);
    linked = !ec;
  }
  if (!linked) {
    ec.clear();
    fs::copy_file(from, to, ec);
    if (ec)
      throw FatalError("cannot copy shard '" + from.string() + "' to '" + to.string() +
                       "': " + ec.message());
  }
  if (fs::symlink_status(to, ec).type() != fs::file_type::regular)
    throw refuse("changed into a link while it was being merged");
  const uint64_t size = fs::file_size(to, ec);
  if (ec || size < needed || size % 512 != 0)
    throw refuse("is " + std::to_string(size) + " bytes, not a whole tar holding the " +
                 std::to_string(needed) + " bytes its samples' records need");
  return linked;
}

// The bytes each shard of part `p` must hold: the end of its last stored blob.
std::vector<uint64_t> shard_bytes_needed(const Part& p) {
  std::vector<uint64_t> needed(p.a.shards().size(), 0);
  for (size_t k = 0; k < p.a.blob_kinds().size(); ++k)
    for (uint64_t i = 0; i < p.a.size(); ++i) {
      const auto b = p.a.blob(k, i);
      if (b.shard >= 0 && static_cast<size_t>(b.shard) < needed.size() && b.offset >= 0 &&
          b.size >= 0)
        needed[static_cast<size_t>(b.shard)] =
            std::max(needed[static_cast<size_t>(b.shard)],
                     static_cast<uint64_t>(b.offset) + static_cast<uint64_t>(b.size));
    }
  return needed;
}

// The manifest options that must agree between parts for the merge to make sense: the typed
// options that shape the output (convert's output_options), or, for manifests written before
// they were recorded, the command line's options less those that do not.
json comparable_options(const format::Manifest& manifest) {
  if (manifest.output_options) return *manifest.output_options;
  json o = manifest.options;
  for (const char* k : {"inputs", "--output", "--shard", "--overwrite", "threads", "--threads"})
    o.erase(k);
  return o;
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

// The parts, opened and checked against each other.
struct PartSet {
  std::vector<std::unique_ptr<Part>> all;  // in the order of the output
  // Those with samples (or the first part, when none has any): parts without samples (e.g.
  // --shard I/N with N above the sample count) have no schema to reconcile and no blobs; only
  // their manifests (inputs, skipped samples) are merged.
  std::vector<const Part*> sampled;
  std::vector<FieldSpec> fields;  // the merged schema
};

// The merge's shards, placed in the staging directory.
struct PlacedShards {
  std::vector<std::string> names;
  std::vector<int32_t> base;      // per sampled part: the merged index of its first shard
  std::vector<uint64_t> samples;  // per shard: samples whose image is in it
  std::vector<format::ManifestShard> manifest;  // per shard: name, size, CRC-32
};

// The first option in which `b` differs from `a` ("--size [32,32] in one, [48,48] in the
// other"); empty when none does. --on-error may differ: a part resumed with `--on-error skip`
// past a bad sample (as the stop message advises) holds the samples it would have held, its
// skips listed.
std::string options_diff(const json& a, const json& b) {
  auto value = [](const json& o, const std::string& k) {
    return o.contains(k) ? o.at(k).dump() : std::string("not given");
  };
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  for (const auto& k : keys)
    if (k != "--on-error" && value(a, k) != value(b, k))
      return k + " " + value(a, k) + " in one, " + value(b, k) + " in the other";
  return "";
}

std::string part_name(const format::ManifestPart& p) {
  return std::to_string(p.index) + "/" + std::to_string(p.count);
}

// The parts of one `convert --shard I/N` split (any part with N > 1): every part 0..N-1 of the
// same split exactly once, in order, or the merge is refused with nothing written: a merge
// short of a part would be a dataset missing its samples, exit 0. True when the parts are a
// split (false: whole datasets, joined as given).
bool check_split_complete(const std::vector<std::unique_ptr<Part>>& all) {
  const Part* first_split = nullptr;
  for (const auto& p : all)
    if (p->manifest.part && p->manifest.part->count > 1) {
      first_split = p.get();
      break;
    }
  if (!first_split) return false;
  const format::ManifestPart& want = *first_split->manifest.part;
  auto listing = [&] {
    std::string out;
    for (const auto& p : all)
      out += (out.empty() ? "'" : ", '") + p->path + "' " +
             (p->manifest.part ? part_name(*p->manifest.part) : std::string("(whole)"));
    return out;
  };
  std::vector<const Part*> at(want.count, nullptr);
  for (const auto& p : all) {
    const auto& mp = p->manifest.part;
    if (!mp || mp->count != want.count || mp->split != want.split ||
        mp->all_inputs != want.all_inputs)
      throw FatalError("part '" + p->path + "' is not a part of the --shard split that part '" +
                       first_split->path + "' (" + part_name(want) +
                       ") belongs to: parts of different conversions cannot be merged as one "
                       "(given: " +
                       listing() + ")");
    if (mp->index >= want.count)
      throw FatalError("part '" + p->path + "' records part " + part_name(*mp) +
                       ", which no split has; it is not a dataset convert --shard wrote");
    if (at[mp->index])
      throw FatalError("part " + part_name(*mp) + " is given twice: '" + at[mp->index]->path +
                       "' and '" + p->path + "'; give each part once");
    at[mp->index] = p.get();
  }
  std::string missing;
  for (uint64_t i = 0; i < want.count; ++i)
    if (!at[i])
      missing +=
          (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(want.count);
  if (!missing.empty())
    throw FatalError("the merge lacks part(s) " + missing + " of the --shard split of " +
                     std::to_string(want.count) + " (given: " + listing() +
                     "): without them the dataset would miss their samples. Convert the missing "
                     "part(s) (the same command with --shard I/" +
                     std::to_string(want.count) + ") and merge all " + std::to_string(want.count));
  for (uint64_t i = 0; i < want.count; ++i)
    if (at[i] != all[i].get()) {
      std::string order;
      for (const Part* p : at) order += " " + p->path;
      throw FatalError(
          "the parts of a --shard split are merged in their order, as one run "
          "orders its samples (given: " +
          listing() + "); give them as: tarmac merge" + order + " -o OUT");
    }
  return true;
}

// Opens every part and checks that they can be merged: valid datasets storing the same blobs,
// numbering classes alike, fields that reconcile, no key twice. Throws FatalError naming the
// part, with nothing written. The parts of a --shard split must all be there, in order, and
// converted alike; whole datasets converted with other options are joined with a warning.
PartSet open_mergeable_parts(const MergeOptions& o, std::vector<std::string>& warnings) {
  if (o.parts.empty()) throw UsageError("nothing to merge: give the part directories");
  PartSet set;
  set.all = open_parts(o.parts);
  const bool split = check_split_complete(set.all);
  for (const auto& p : set.all)
    if (p->a.size() > 0) set.sampled.push_back(p.get());
  if (set.sampled.empty()) set.sampled.push_back(set.all[0].get());
  const std::vector<const Part*>& parts = set.sampled;
  const auto& kinds = parts[0]->a.blob_kinds();
  for (const auto& p : parts)
    if (p->a.blob_kinds() != kinds)
      throw FatalError("part '" + p->path +
                       "' stores different blobs (images, dense maps) than part '" +
                       parts[0]->path + "'; the parts cannot be merged");
  check_same_classes(set.all);  // before the fields: a part without classes lacks `cls` too
  set.fields = reconcile(parts);
  check_unique_keys(parts);
  for (const auto& p : parts) {
    const std::string diff =
        options_diff(comparable_options(parts[0]->manifest), comparable_options(p->manifest));
    if (diff.empty()) continue;
    const std::string what = "part '" + p->path + "' was converted with other options than part '" +
                             parts[0]->path + "' (" + diff + ")";
    // Parts of one split make one dataset: one made with two --size is no such thing.
    if (split)
      throw FatalError(what +
                       ": the parts of one --shard split must be converted alike; "
                       "convert that part again with the others' options");
    warnings.push_back(what);
  }
  return set;
}

// Takes the output directory's lock and gets it ready: a dead merge's leftovers removed, an
// empty staging directory made. Throws FatalError for an output that is a file, locked, or not
// empty, leaving what was there (but a dead merge's leftovers).
std::unique_ptr<OutputLock> lock_output(const MergeOptions& o, const fs::path& out,
                                        const fs::path& staging) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw FatalError("output '" + o.output + "' exists and is not a directory; choose a new one");
  std::string holder;
  for (const auto& a : o.command_line) holder += (holder.empty() ? "" : " ") + a;
  auto lock =
      std::make_unique<OutputLock>(out, holder.empty() ? "tarmac::merge_datasets()" : holder);
  // Under the lock: a staging directory without a checkpoint is a merge that died (never a
  // dataset); an interrupted conversion's is converted work, left alone.
  // One killed while publishing had moved some of its files out: those go too, so that the
  // same command can be run again.
  if (!fs::exists(staging / kCheckpointFile, ec)) discard_unfinished_publish(out, staging);
  if (!empty_but_lock(out))
    throw FatalError("output '" + o.output + "' is not an empty directory; choose a new one");
  fs::create_directories(staging, ec);
  if (ec) throw FatalError("cannot create '" + staging.string() + "': " + ec.message());
  return lock;
}

// Hard-links (or copies) every part's shards into the staging directory, renumbered in order,
// checking each (place_shard); counts samples and blob bytes. Throws FatalError (Interrupted on
// a stop request) with the staging directory left for the caller to remove.
PlacedShards place_shards(const MergeOptions& o, const PartSet& set, const fs::path& staging,
                          MergeResult& result) {
  PlacedShards placed;
  for (const auto& p : set.all) {
    if (p->a.size() > 0 || p.get() == set.sampled[0])
      placed.base.push_back(static_cast<int32_t>(placed.names.size()));
    const format::Manifest& m = p->manifest;
    const size_t first_shard = placed.samples.size();
    placed.samples.resize(first_shard + p->a.shards().size(), 0);
    if (!p->a.blob_kinds().empty())
      for (uint64_t i = 0; i < p->a.size(); ++i) {
        const int32_t s = p->a.blob(0, i).shard;  // checked by the part's validation
        if (s >= 0 && static_cast<size_t>(s) < p->a.shards().size())
          ++placed.samples[first_shard + static_cast<size_t>(s)];
      }
    const std::vector<uint64_t> needed = shard_bytes_needed(*p);
    for (size_t s = 0; s < p->a.shards().size(); ++s) {
      throw_if_stopped(o.stop);
      const std::string name = shard_name(placed.names.size());
      const fs::path from = fs::path(p->path) / p->a.shards()[s];
      if (place_shard(p->path, from, staging / name, o.copy, needed[s]))
        ++result.linked;
      else
        ++result.copied;
      placed.names.push_back(name);
      // The part's manifest knows each shard's CRC-32; computed when it does not.
      std::string crc;
      if (m.shards && s < m.shards->size() && (*m.shards)[s].name == p->a.shards()[s])
        crc = (*m.shards)[s].crc32;
      if (crc.empty()) crc = crc32_hex(file_crc32((staging / name).string()));
      placed.manifest.push_back({name, fs::file_size(staging / name), crc});
    }
    result.samples += p->a.size();
    for (size_t k = 0; k < p->a.blob_kinds().size(); ++k)
      for (uint64_t i = 0; i < p->a.size(); ++i)
        result.image_bytes += static_cast<uint64_t>(p->a.blob(k, i).size);
  }
  result.shards = placed.names.size();
  return placed;
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

// Writes the merged manifest (and shard list) into the staging directory: one run's. Its lists
// are the parts' joined, each entry once; its counts are those the lists imply
// (counts_from_lists), as a run's add up to its lists.
void write_merged_manifest(const MergeOptions& o, const PartSet& set, const PlacedShards& placed,
                           const std::map<std::string, std::string>& meta, const fs::path& staging,
                           MergeResult& result) {
  const Part& first = *set.sampled[0];
  format::Manifest manifest;
  manifest.tool_version = kVersion;
  manifest.command_line = o.command_line;
  manifest.options = first.manifest.options;
  manifest.output_options = first.manifest.output_options;
  manifest.merged_from = json::array();
  manifest.shards = placed.manifest;
  std::set<std::string> seen_inputs, seen_skipped, seen_ignored, seen_duplicates;
  for (const auto& p : set.all) {
    const format::Manifest& m = p->manifest;
    manifest.merged_from->push_back({{"path", p->path},
                                     {"samples", p->a.size()},
                                     {"shards", p->a.shards().size()},
                                     {"labels_crc32", m.labels_crc32.value_or("")},
                                     {"part", m.part ? format::part_json(*m.part) : json(nullptr)},
                                     {"inputs", m.inputs}});
    append_once(manifest.inputs, m.inputs, seen_inputs);
    append_once(manifest.skipped, m.skipped, seen_skipped);
    append_once(manifest.ignored, m.ignored, seen_ignored);
    append_once(manifest.duplicates, m.duplicates, seen_duplicates);
  }
  // The table's provenance, when every part read the same table (each reads it whole).
  const std::optional<json>& table = first.manifest.table;
  bool same_table = table.has_value();
  for (const auto& p : set.all) same_table = same_table && p->manifest.table == table;
  if (same_table) manifest.table = table;
  if (table && !same_table)
    result.warnings.push_back(
        "the parts were converted from different --table files: the merged "
        "manifest records none (each part's is in its own manifest)");
  const fs::path labels = staging / kLabelsFile;
  manifest.counts = format::counts_from_lists(manifest, result.samples, result.image_bytes);
  manifest.annotation = format::ManifestAnnotation{kLabelsFile, result.annotation_bytes};
  manifest.labels_crc32 = crc32_hex(file_crc32(labels.string()));
  manifest.schema = format::parse_ordered(meta.at(kMetaSchema));
  manifest.columns.emplace();  // the parts' columns are not merged
  if (!placed.names.empty()) {
    format::ShardList list;
    for (size_t k = 0; k < placed.names.size(); ++k)
      list.shards.push_back(
          {placed.names[k], placed.samples[k], fs::file_size(staging / placed.names[k])});
    manifest.shard_list = {kShardListFile, write_shard_list(staging, list)};
  }
  write_file_atomic((staging / kManifestFile).string(), format::sealed_manifest_text(manifest));
}

}  // namespace

MergeResult merge_datasets(const MergeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MergeResult result;
  const PartSet parts = open_mergeable_parts(o, result.warnings);
  const fs::path out(o.output), staging = out / kStagingDir;
  const std::unique_ptr<OutputLock> lock = lock_output(o, out, staging);
  try {
    const PlacedShards placed = place_shards(o, parts, staging, result);
    const auto meta = write_merged_labels(o, parts, placed, staging, result);
    write_merged_manifest(o, parts, placed, meta, staging, result);
    publish_dataset(out, staging, placed.names, /*replaced=*/{});
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace tarmac
