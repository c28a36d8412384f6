#include "format/layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"

namespace tarmac {
namespace {

using json = nlohmann::json;
using namespace format;

// Thrown inside the parser when the layout cannot be used any further.
struct Unusable {};

class LayoutReader {
 public:
  LayoutReader(const SafetensorsHeader& h, std::vector<std::string>* problems)
      : h_(h), problems_(problems) {}

  DatasetLayout read() {
    DatasetLayout l;
    for (const TensorInfo& t : h_.tensors) {
      if (t.shape.size() > kMaxDims)
        problem("tensor '" + t.name + "' has " + std::to_string(t.shape.size()) +
                " dimensions, more than the " + std::to_string(kMaxDims) + " tarmac reads");
      if (t.begin % dtype_size(t.dtype) != 0)
        problem("tensor '" + t.name + "' is not aligned to its element size");
    }
    const std::string* fmt = meta(kMetaFormat);
    if (fmt && *fmt != kFormatName)
      problem("format is '" + *fmt + "', this reader reads '" + std::string(kFormatName) + "'");
    const std::string* num = meta(kMetaNumSamples);
    if (!num) throw Unusable{};
    if (num->empty() || num->size() > kMaxNumSamplesDigits ||
        num->find_first_not_of("0123456789") != std::string::npos) {
      problem("num_samples '" + *num + "' is not a decimal count of at most " +
              std::to_string(kMaxNumSamplesDigits) + " digits");
      throw Unusable{};
    }
    l.num_samples = std::stoull(*num);
    const auto n = static_cast<int64_t>(l.num_samples);

    l.key_values = need(values_tensor(kKeyColumn), DType::U8, {-1});
    l.key_offsets = need(offsets_tensor(kKeyColumn), DType::I64, {n + 1});
    if (!l.key_values || !l.key_offsets) throw Unusable{};

    l.shards = string_array(kMetaShards);
    std::set<std::string> seen;
    for (const auto& s : l.shards)
      if (!is_valid_shard_entry(s) || !seen.insert(s).second)
        problem("shard name '" + s +
                "' is not a plain file name (empty, a path, hidden or repeated)");
    for (const std::string& kind : string_array(kMetaBlobs)) {
      BlobLayout b;
      b.kind = kind;
      for (size_t c = 0; c < kNumBlobColumns; ++c)
        b.columns[c] = need(blob_tensor(kind, BlobColumn(c)), kBlobColumns[c].dtype, {n});
      for (const TensorInfo* t : b.columns)
        if (!t) throw Unusable{};
      l.blobs.push_back(std::move(b));
    }
    if (l.has_images() && l.blobs[0].kind != kImageBlob)
      problem("the first stored blob kind is '" + l.blobs[0].kind + "', not '" + kImageBlob + "'");
    read_encodings(l);
    read_classes(l);
    read_table(l);
    read_blob_geometry(l);
    if (l.has_images()) l.affine = need(kAffineColumn, DType::F64, {n, 2, 3});

    bool schema_read = false;
    if (const std::string* schema = meta(kMetaSchema)) try {
        for (FieldSpec& f : schema_from_json(*schema)) {
          FieldLayout fl;
          if (f.ragged) {
            std::vector<int64_t> shape = f.shape;  // [-1, inner...]
            fl.values = need(values_tensor(f.name), f.dtype, shape);
            fl.offsets = need(offsets_tensor(f.name), DType::I64, {n + 1});
          } else {
            std::vector<int64_t> shape{n};
            shape.insert(shape.end(), f.shape.begin(), f.shape.end());
            fl.values = need(f.name, f.dtype, shape);
          }
          if (f.nullable) fl.valid = need(valid_tensor(f.name), DType::BOOL, {n});
          fl.spec = std::move(f);
          l.fields.push_back(std::move(fl));
        }
        schema_read = true;
      } catch (const ParseError& e) {
        problem(e.what());
      }
    // Every tensor is described: a reader that ignored unknown ones would hide a writer's bug.
    if (schema_read)
      for (const TensorInfo& t : h_.tensors)
        if (!expected_.count(t.name))
          problem("tensor '" + t.name + "' is neither a key, blob, affine nor schema column");
    return l;
  }

 private:
  void problem(const std::string& what) {
    if (!problems_) throw ParseError("labels.safetensors: " + what);
    problems_->push_back(what);
  }

  const std::string* meta(const char* key) {
    auto it = h_.metadata.find(key);
    if (it != h_.metadata.end()) return &it->second;
    problem(std::string("metadata entry '") + key + "' is missing");
    return nullptr;
  }

  // A metadata entry holding a JSON array of strings.
  std::vector<std::string> string_array(const char* key) {
    const std::string* text = meta(key);
    if (!text) throw Unusable{};
    const json j = json::parse(*text, nullptr, false);
    std::vector<std::string> out;
    if (j.is_array())
      for (const auto& e : j) {
        if (!e.is_string()) break;
        out.push_back(e.get<std::string>());
      }
    if (!j.is_array() || out.size() != j.size()) {
      problem(std::string("metadata entry '") + key + "' is not a JSON array of strings");
      throw Unusable{};
    }
    return out;
  }

  // The optional `classes` entry: distinct names, with the `cls` column they name.
  void read_classes(DatasetLayout& l) {
    auto it = h_.metadata.find(kMetaClasses);
    if (it == h_.metadata.end()) return;
    const json j = json::parse(it->second, nullptr, false);
    std::vector<std::string> names;
    if (j.is_array())
      for (const auto& e : j)
        if (e.is_string()) names.push_back(e.get<std::string>());
    if (!j.is_array() || names.size() != j.size()) {
      problem("metadata entry 'classes' is not a JSON array of strings");
      return;
    }
    if (std::set<std::string>(names.begin(), names.end()).size() != names.size())
      problem("metadata entry 'classes' names a class twice");
    l.classes = std::move(names);
  }

  // The optional `table` entry: a JSON object.
  void read_table(DatasetLayout& l) {
    auto it = h_.metadata.find(kMetaTable);
    if (it == h_.metadata.end()) return;
    if (!json::parse(it->second, nullptr, false).is_object()) {
      problem("metadata entry 'table' is not a JSON object");
      return;
    }
    l.table = it->second;
  }

  // The optional `blob_geometry` entry: blob kinds of `blobs` -> {"kind": ...}; kinds other
  // than "mask" are a later version's and ignored.
  void read_blob_geometry(DatasetLayout& l) {
    auto it = h_.metadata.find(kMetaBlobGeometry);
    if (it == h_.metadata.end()) return;
    const json j = json::parse(it->second, nullptr, false);
    if (!j.is_object()) {
      problem("metadata entry 'blob_geometry' is not a JSON object");
      return;
    }
    for (const BlobLayout& b : l.blobs) {
      const auto e = j.find(b.kind);
      if (e == j.end()) continue;
      if (!e->is_object() || !e->contains("kind") || !(*e)["kind"].is_string()) {
        problem("blob_geometry of '" + b.kind + "' is not an object with a 'kind' string");
        continue;
      }
      if ((*e)["kind"] == "mask") l.mask_blobs.push_back(b.kind);
    }
    for (const auto& item : j.items()) {
      const std::string& kind = item.key();
      if (std::none_of(l.blobs.begin(), l.blobs.end(),
                       [&](const BlobLayout& b) { return b.kind == kind; }))
        problem("blob_geometry names blob kind '" + kind + "', which 'blobs' does not list");
    }
  }

  void read_encodings(DatasetLayout& l) {
    auto it = h_.metadata.find(kMetaBlobEncodings);
    if (it == h_.metadata.end()) return;  // written before the entry existed
    const json j = json::parse(it->second, nullptr, false);
    if (!j.is_object()) {
      problem("metadata entry 'blob_encodings' is not a JSON object");
      return;
    }
    for (BlobLayout& b : l.blobs) {
      const auto e = j.find(b.kind);
      const auto enc =
          e != j.end() && e->is_string() ? encoding_from_name(e->get<std::string>()) : std::nullopt;
      if (!enc)
        problem("blob_encodings gives no known encoding for '" + b.kind +
                "' (jpg, png, webp, rgb or source)");
      b.encoding = enc;
    }
    if (j.size() != l.blobs.size())
      problem("blob_encodings names " + std::to_string(j.size()) + " blob kinds, 'blobs' " +
              std::to_string(l.blobs.size()));
  }

  // The tensor `name`, checked against a dtype and a shape (-1: any length). Null (after a
  // problem) when it is missing or does not match.
  const TensorInfo* need(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
    expected_.insert(name);
    const TensorInfo* t = h_.find(name);
    if (!t) {
      problem("required tensor '" + name + "' is missing");
      return nullptr;
    }
    if (t->dtype != dtype) {
      problem("tensor '" + name + "' has dtype " + std::string(dtype_name(t->dtype)) +
              ", expected " + std::string(dtype_name(dtype)));
      return nullptr;
    }
    bool match = t->shape.size() == shape.size();
    for (size_t i = 0; match && i < shape.size(); ++i)
      match = shape[i] < 0 || shape[i] == t->shape[i];
    if (!match) {
      problem("tensor '" + name + "' has shape " + shape_text(t->shape) + ", expected " +
              shape_text(shape));
      return nullptr;
    }
    return t;
  }

  const SafetensorsHeader& h_;
  std::vector<std::string>* problems_;
  std::set<std::string> expected_;
};

}  // namespace

const FieldLayout* DatasetLayout::find_field(std::string_view name) const {
  for (const FieldLayout& f : fields)
    if (f.spec.name == name) return &f;
  return nullptr;
}

std::map<std::string, std::string> layout_metadata(const LayoutMetadata& m) {
  json shards = json::array(), blobs = json::array(), encodings = json::object();
  bool all_known = true;
  for (const auto& s : m.shards) shards.push_back(s);
  for (const auto& [kind, enc] : m.blobs) {
    blobs.push_back(kind);
    if (enc)
      encodings[kind] = std::string(encoding_name(*enc));
    else
      all_known = false;
  }
  std::map<std::string, std::string> meta = {{kMetaFormat, std::string(kFormatName)},
                                             {kMetaNumSamples, std::to_string(m.num_samples)},
                                             {kMetaSchema, schema_to_json(m.fields)},
                                             {kMetaShards, shards.dump()},
                                             {kMetaBlobs, blobs.dump()},
                                             {kMetaTool, m.tool}};
  if (all_known) meta[kMetaBlobEncodings] = encodings.dump();
  if (m.classes) meta[kMetaClasses] = json(*m.classes).dump();
  if (m.table) meta[kMetaTable] = *m.table;
  if (!m.mask_blobs.empty()) {
    json g = json::object();
    for (const auto& kind : m.mask_blobs) g[kind] = {{"kind", "mask"}};
    meta[kMetaBlobGeometry] = g.dump();
  }
  return meta;
}

DatasetLayout read_layout(const SafetensorsHeader& header) {
  try {
    return LayoutReader(header, nullptr).read();
  } catch (const Unusable&) {  // never without a problem, which threw first
    throw ParseError("labels.safetensors: unusable");
  }
}

std::optional<DatasetLayout> read_layout(const SafetensorsHeader& header,
                                         std::vector<std::string>& problems) {
  try {
    return LayoutReader(header, &problems).read();
  } catch (const Unusable&) {
    return std::nullopt;
  }
}

}  // namespace tarmac
