#include "columns/column_ops.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "columns/column_parts.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/printable.h"
#include "common/version.h"
#include "format/column_file.h"
#include "format/json_object.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"
#include "write/file_util.h"
#include "write/manifest_file.h"
#include "write/output_lock.h"
#include "write/safetensors_writer.h"

namespace tarmac {
namespace fs = std::filesystem;
using format::PartChunk;
using format::PartRecord;
using format::read_part_records;

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

// One chunk file of a part, mapped and checked.
struct Chunk {
  std::string file;
  MappedFile map;
  SafetensorsHeader header;
  const TensorInfo* index = nullptr;
  const TensorInfo* shape = nullptr;
  const TensorInfo* values = nullptr;
  const TensorInfo* digest = nullptr;  // U8 [k, 16]; null in a chunk of an older derive

  template <class T>
  const T* at(const TensorInfo* t) const {
    return reinterpret_cast<const T*>(map.bytes().data() + t->begin);
  }
};

// Where one sample's output lies.
struct Source {
  uint32_t chunk = UINT32_MAX;  // none yet
  uint32_t crc = 0;             // the CRC-32 of its values' bytes
  uint64_t row = 0;             // its row of the chunk's index and shape
  uint64_t element = 0;         // its first element in the chunk's values
};

[[noreturn]] void bad_chunk(const fs::path& file, const std::string& what) {
  throw ParseError(file.string() + ": " + what +
                   " (the chunk is damaged: re-run its rank with --restart)");
}

class Merger {
 public:
  explicit Merger(const ColumnMergeOptions& o) : o_(o), dir_(o.dir) {}

  ColumnMergeResult run() {
    const auto t0 = t0_ = std::chrono::steady_clock::now();
    if (!format::is_valid_column_name(o_.name))
      throw ArgumentError("'" + printable(o_.name) +
                          "' is not a column name: use 1-128 of A-Z a-z 0-9 _ . -, starting "
                          "with a letter or digit");
    const DatasetIdentity id = dataset_identity(dir_);
    n_ = id.num_samples;
    // The reader puts columns beside the label fields and the image (ds[i][NAME]).
    if (o_.name == "image" ||
        std::find(id.field_names.begin(), id.field_names.end(), o_.name) != id.field_names.end())
      throw ColumnRefused("'" + o_.name + "' is the name of " +
                          (o_.name == "image" ? std::string("the image") : "a label field") +
                          " of the dataset; give the column another name (derive --name)");
    const fs::path parts_dir = dir_ / format::column_parts_dir(o_.name);
    if (!fs::is_directory(parts_dir))
      throw ColumnRefused("column '" + o_.name + "' has no parts in '" + parts_dir.string() +
                          "': compute them first with `python -m tarmac.derive " + o_.dir +
                          " --name " + o_.name + " --fn MODULE:FUNC` on every rank");
    OutputLock lock(dir_, o_.command);
    std::vector<PartRecord> parts = read_part_records(parts_dir);
    if (parts.empty())
      throw ColumnRefused("column '" + o_.name + "': '" + parts_dir.string() +
                          "' holds no part records (part-R-of-W.json)");
    check_parts(parts, id);
    sources_.assign(n_, Source{});
    uint64_t chunk_bytes = 0;
    for (const PartRecord& p : parts)
      for (const PartChunk& pc : p.chunks) chunk_bytes += pc.bytes;
    for (const PartRecord& p : parts) load_part(parts_dir, p, chunk_bytes);
    report("reading parts", read_bytes_, chunk_bytes, true);
    report_missing(parts);

    ColumnMergeResult r;
    r.path = (dir_ / format::column_file(o_.name)).string();
    write(parts, id, r);
    if (!o_.keep_parts) {
      std::error_code ec;
      fs::remove_all(parts_dir, ec);
      r.parts_removed = !ec;
    }
    r.samples = n_;
    r.parts = parts.size();
    r.chunks = chunks_.size();
    r.world = world_;
    r.dtype = std::string(dtype_name(dtype_));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  void check_parts(const std::vector<PartRecord>& parts, const DatasetIdentity& id) {
    std::set<uint64_t> worlds;
    for (const PartRecord& p : parts) worlds.insert(p.world);
    if (worlds.size() > 1) {
      std::string list;
      for (const PartRecord& p : parts) list += "\n  " + p.path.filename().string();
      throw ColumnRefused("column '" + o_.name + "' has parts of " + std::to_string(worlds.size()) +
                          " different world sizes; a column is computed by one set of ranks. "
                          "Remove the stale parts (or all of them: `tarmac column rm " +
                          o_.dir + " " + o_.name + "`) and derive again:" + list);
    }
    world_ = *worlds.begin();
    for (const PartRecord& p : parts) {
      const std::string part = p.path.filename().string();
      if (p.column != o_.name)
        throw ColumnRefused(part + " is a part of column '" + p.column + "', not '" + o_.name +
                            "'");
      if (p.labels_crc32 != id.labels_crc32 || p.num_samples != n_)
        throw ColumnRefused(
            part +
            " was computed from another version of the dataset (its annotation file had "
            "CRC-32 " +
            p.labels_crc32 + " and " + std::to_string(p.num_samples) + " samples; '" + o_.dir +
            "' now has " + id.labels_crc32 + " and " + std::to_string(n_) +
            "): the dataset was converted again after the part was computed. Remove the "
            "column's parts with `tarmac column rm " +
            o_.dir + " " + o_.name + "` and derive again");
      const format::SampleRange share = format::rank_share(n_, p.rank, p.world);
      if (p.begin != share.begin || p.end != share.end)
        throw ColumnRefused(part + " covers samples " + std::to_string(p.begin) + ".." +
                            std::to_string(p.end) + ", but rank " + std::to_string(p.rank) +
                            " of " + std::to_string(p.world) + " computes " +
                            std::to_string(share.begin) + ".." + std::to_string(share.end));
      if (p.fn != parts.front().fn || p.fn_version != parts.front().fn_version)
        throw ColumnRefused(part + " was computed by " + p.fn + " version '" + p.fn_version +
                            "', " + parts.front().path.filename().string() + " by " +
                            parts.front().fn + " version '" + parts.front().fn_version +
                            "': a column is computed by one function. Re-run the odd rank with "
                            "the same --fn, --fn-version and --restart");
      if (p.digest != parts.front().digest) all_digests_ = false;
      reused_ += p.reused;
    }
  }

  // Each chunk is read once: its structure is walked and every sample's values summed (their
  // CRC-32s give the merged column's values_crc32 without reading them again); the pieces'
  // CRC-32s joined must equal the chunk's in its part record. A chunk whose structure is
  // wrong is reported by its CRC-32 when that disagrees too (the damage is the cause).
  void report(const char* phase, uint64_t done, uint64_t total, bool final) {
    if (!o_.progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (!final && now - last_report_ < std::chrono::milliseconds(250)) return;
    last_report_ = now;
    o_.progress({phase, done, total, std::chrono::duration<double>(now - t0_).count(), final});
  }

  void load_part(const fs::path& parts_dir, const PartRecord& p, uint64_t chunk_bytes) {
    for (const PartChunk& pc : p.chunks) {
      const fs::path file = parts_dir / pc.file;
      throw_if_stopped(o_.stop);
      auto c = std::make_unique<Chunk>();
      c->file = file.string();
      c->map = MappedFile(file.string());  // throws FatalError naming a missing chunk
      const auto bytes = c->map.bytes();
      if (bytes.size() != pc.bytes)
        bad_chunk(file, "is " + std::to_string(bytes.size()) + " bytes, its part record says " +
                            std::to_string(pc.bytes));
      const auto chunk_id = static_cast<uint32_t>(chunks_.size());
      uint32_t crc = 0;
      try {
        crc = walk_chunk(file, p, pc, *c, chunk_id);
      } catch (const std::runtime_error&) {  // ParseError, ColumnRefused (another dtype)
        if (const uint32_t whole = crc32_of(bytes); crc32_hex(whole) != pc.crc32)
          bad_crc(file, whole, pc);
        throw;
      }
      if (crc32_hex(crc) != pc.crc32) bad_crc(file, crc, pc);
      chunks_.push_back(std::move(c));
      read_bytes_ += pc.bytes;
      report("reading parts", read_bytes_, chunk_bytes, false);
    }
  }

  [[noreturn]] static void bad_crc(const fs::path& file, uint32_t crc, const PartChunk& pc) {
    bad_chunk(file, "its CRC-32 is " + crc32_hex(crc) + ", its part record says " + pc.crc32);
  }

  // Checks a chunk's tensors and records where each of its samples lies; returns the chunk's
  // CRC-32. Throws ParseError (bad_chunk) on anything inconsistent.
  uint32_t walk_chunk(const fs::path& file, const PartRecord& p, const PartChunk& pc, Chunk& c,
                      uint32_t chunk_id) {
    const auto bytes = c.map.bytes();
    try {
      c.header = parse_safetensors(bytes);
    } catch (const ParseError& e) {
      bad_chunk(file, e.what());
    }
    c.index = c.header.find("index");
    c.shape = c.header.find("shape");
    c.values = c.header.find("values");
    c.digest = c.header.find(format::kColumnDigest);
    if (!c.index || !c.shape || !c.values || c.header.tensors.size() != (c.digest ? 4u : 3u))
      bad_chunk(file,
                "does not hold exactly the tensors index, shape, values and (optionally) "
                "digest");
    const auto k = static_cast<int64_t>(pc.samples);
    if (c.digest && (c.digest->dtype != DType::U8 ||
                     c.digest->shape != std::vector<int64_t>{k, format::kDigestBytes}))
      bad_chunk(file, "'digest' is not U8 [" + std::to_string(k) + ", " +
                          std::to_string(format::kDigestBytes) + "]");
    if (!c.digest) all_digests_ = false;
    if (c.index->dtype != DType::I64 || c.index->shape != std::vector<int64_t>{k})
      bad_chunk(file, "'index' is not I64 [" + std::to_string(k) + "]");
    if (c.shape->dtype != DType::I64 || c.shape->shape.size() != 2 || c.shape->shape[0] != k ||
        c.shape->shape[1] < 0 || c.shape->shape[1] >= static_cast<int64_t>(format::kMaxDims))
      bad_chunk(file, "'shape' is not I64 [" + std::to_string(k) + ", D]");
    if (c.values->shape.size() != 1) bad_chunk(file, "'values' is not one-dimensional");
    for (const TensorInfo* t : {c.index, c.shape, c.values})
      if (t->begin % dtype_size(t->dtype) != 0)
        bad_chunk(file, "tensor '" + t->name + "' is not aligned to its element size");
    const auto d = static_cast<size_t>(c.shape->shape[1]);
    if (!have_kind_) {
      dtype_ = c.values->dtype;
      ndim_ = d;
      have_kind_ = true;
    } else if (dtype_ != c.values->dtype || ndim_ != d) {
      bad_kind(file, c.values->dtype, d);
    }
    const size_t esz = dtype_size(c.values->dtype);
    const uint64_t values_begin = c.values->begin;
    Crc32Concat file_crc;
    file_crc.append(crc32_of(bytes.first(values_begin)), values_begin);
    const auto* index = c.at<int64_t>(c.index);
    const auto* shape = c.at<int64_t>(c.shape);
    const auto total = static_cast<uint64_t>(c.values->shape[0]);
    uint64_t element = 0;
    for (int64_t s = 0; s < k; ++s) {
      const int64_t i = index[s];
      if (i < static_cast<int64_t>(p.begin) || i >= static_cast<int64_t>(p.end))
        bad_chunk(file, "holds sample " + std::to_string(i) + ", outside its rank's samples " +
                            std::to_string(p.begin) + ".." + std::to_string(p.end));
      uint64_t elements = 1;
      for (size_t a = 0; a < d; ++a) {
        const int64_t dim = shape[s * static_cast<int64_t>(d) + static_cast<int64_t>(a)];
        if (dim < 0 || (dim > 0 && elements > (total + 1) / static_cast<uint64_t>(dim)))
          bad_chunk(file, "sample " + std::to_string(i) + " has an impossible shape");
        elements *= static_cast<uint64_t>(dim);
      }
      if (element + elements > total)
        bad_chunk(file,
                  "its shapes need more than the " + std::to_string(total) + " values it holds");
      Source& src = sources_[static_cast<size_t>(i)];
      if (src.chunk != UINT32_MAX)
        bad_chunk(file, "holds sample " + std::to_string(i) + ", which " +
                            (src.chunk == chunk_id ? file.string() : chunks_[src.chunk]->file) +
                            " holds too");
      const auto piece = bytes.subspan(values_begin + element * esz, elements * esz);
      src = {chunk_id, crc32_of(piece), static_cast<uint64_t>(s), element};
      file_crc.append(src.crc, piece.size());
      element += elements;
    }
    if (element != total)
      bad_chunk(file, "holds " + std::to_string(total) + " values, its shapes need " +
                          std::to_string(element));
    const uint64_t values_end = values_begin + total * esz;
    file_crc.append(crc32_of(bytes.subspan(values_end)), bytes.size() - values_end);
    return file_crc.value();
  }

  [[noreturn]] void bad_kind(const fs::path& file, DType dtype, size_t d) const {
    throw ColumnRefused(file.string() + " holds " + std::string(dtype_name(dtype)) +
                        " outputs of " + std::to_string(d) + " dimensions, " +
                        chunks_.front()->file + " holds " + std::string(dtype_name(dtype_)) +
                        " of " + std::to_string(ndim_) +
                        ": one column has one dtype and one number of dimensions");
  }

  void report_missing(const std::vector<PartRecord>& parts) {
    uint64_t missing_total = 0;
    std::string lines;
    std::map<uint64_t, const PartRecord*> by_rank;
    for (const PartRecord& p : parts) by_rank[p.rank] = &p;
    for (uint64_t r = 0; r < world_; ++r) {
      const format::SampleRange share = format::rank_share(n_, r, world_);
      std::vector<uint64_t> missing;
      for (uint64_t i = share.begin; i < share.end; ++i)
        if (sources_[i].chunk == UINT32_MAX) missing.push_back(i);
      if (missing.empty()) continue;
      missing_total += missing.size();
      const std::string who = "rank " + std::to_string(r) + " of " + std::to_string(world_);
      const auto it = by_rank.find(r);
      if (it == by_rank.end()) {
        lines += "\n  " + who + ": no part at all, samples " + ranges_text(missing) +
                 " (run derive with --rank " + std::to_string(r) + " --world " +
                 std::to_string(world_) + ")";
      } else {
        lines += "\n  " + who + ": " + std::to_string(missing.size()) + " of " +
                 std::to_string(share.end - share.begin) + " samples missing, " +
                 ranges_text(missing) +
                 (it->second->complete ? " (its part says complete: it is damaged; re-run the "
                                         "rank with --restart)"
                                       : " (its part is unfinished: re-run the rank, it goes on "
                                         "where it stopped)");
      }
    }
    if (missing_total)
      throw ColumnRefused(
          "column '" + o_.name + "' is incomplete: " + std::to_string(missing_total) + " of " +
          std::to_string(n_) + " samples have no output; nothing was merged." + lines);
  }

  std::pair<const Chunk&, Source> at(uint64_t i) const {
    const Source s = sources_[i];
    return {*chunks_[s.chunk], s};
  }

  // Each sample's shape into `shapes` and the values' offsets into `offsets`; returns the shape
  // every sample shares, if they do.
  std::optional<std::vector<int64_t>> gather_shapes(std::vector<int64_t>& shapes,
                                                    std::vector<int64_t>& offsets) const {
    std::optional<std::vector<int64_t>> uniform;
    for (uint64_t i = 0; i < n_; ++i) {
      const auto [chunk, src] = at(i);
      const int64_t* shape =
          chunk.at<int64_t>(chunk.shape) + src.row * static_cast<uint64_t>(ndim_);
      std::vector<int64_t> s(shape, shape + ndim_);
      int64_t elements = 1;
      for (const int64_t dim : s) elements *= dim;
      std::copy(s.begin(), s.end(), shapes.begin() + static_cast<ptrdiff_t>(i * ndim_));
      offsets[i + 1] = offsets[i] + elements;
      if (i == 0)
        uniform = s;
      else if (uniform && *uniform != s)
        uniform.reset();
    }
    return uniform;
  }

  // The input digests (format.md 9), gathered in sample order.
  std::vector<uint8_t> gather_digests() const {
    const auto db = static_cast<size_t>(format::kDigestBytes);
    std::vector<uint8_t> digests(n_ * db);
    for (uint64_t i = 0; i < n_; ++i) {
      const auto [chunk, src] = at(i);
      std::memcpy(digests.data() + i * db, chunk.at<uint8_t>(chunk.digest) + src.row * db, db);
    }
    return digests;
  }

  void write(const std::vector<PartRecord>& parts, const DatasetIdentity& id,
             ColumnMergeResult& r) {
    // Shapes and offsets in memory (16 bytes + 8 D per sample); values streamed from the chunks.
    std::vector<int64_t> shapes(n_ * ndim_);
    std::vector<int64_t> offsets(n_ + 1, 0);
    const std::optional<std::vector<int64_t>> uniform = gather_shapes(shapes, offsets);
    const size_t esz = dtype_size(dtype_);
    const auto total = static_cast<uint64_t>(offsets[n_]);
    auto each_value_piece = [&](const std::function<void(std::span<const uint8_t>)>& f) {
      for (uint64_t i = 0; i < n_; ++i) {
        if ((i & 4095) == 0) {
          throw_if_stopped(o_.stop);
          report("writing", static_cast<uint64_t>(offsets[i]) * esz, total * esz, false);
        }
        const auto [chunk, src] = at(i);
        const auto count = static_cast<size_t>(offsets[i + 1] - offsets[i]);
        f(chunk.map.bytes().subspan(chunk.values->begin + src.element * esz, count * esz));
      }
    };
    Crc32Concat values_crc;  // from the samples' CRC-32s, summed when their chunks were read
    for (uint64_t i = 0; i < n_; ++i)
      values_crc.append(sources_[i].crc, static_cast<uint64_t>(offsets[i + 1] - offsets[i]) * esz);
    auto crc_of = [](const std::vector<int64_t>& v) {
      return crc32_update(0, v.data(), v.size() * sizeof(int64_t));
    };
    std::vector<int64_t> values_shape{static_cast<int64_t>(total)};
    if (uniform && n_ > 0) {
      values_shape = {static_cast<int64_t>(n_)};
      values_shape.insert(values_shape.end(), uniform->begin(), uniform->end());
      r.shape = shape_text(*uniform);
    } else {
      r.shape = "ragged, " + std::to_string(ndim_) + "-D";
    }
    std::vector<TensorSpec> tensors;
    tensors.push_back({format::kColumnValues, dtype_, values_shape, [&](ByteSink& sink) {
                         each_value_piece([&](std::span<const uint8_t> b) { sink.write(b); });
                       }});
    tensors.push_back(
        {format::kColumnOffsets, DType::I64, {static_cast<int64_t>(n_ + 1)}, [&](ByteSink& sink) {
           sink.write({reinterpret_cast<const uint8_t*>(offsets.data()),
                       offsets.size() * sizeof(int64_t)});
         }});
    tensors.push_back({format::kColumnShapes,
                       DType::I64,
                       {static_cast<int64_t>(n_), static_cast<int64_t>(ndim_)},
                       [&](ByteSink& sink) {
                         sink.write({reinterpret_cast<const uint8_t*>(shapes.data()),
                                     shapes.size() * sizeof(int64_t)});
                       }});
    // The input digests (format.md 9), gathered in sample order; none when a part lacks them.
    std::vector<uint8_t> digests;
    const bool with_digests = all_digests_ && !parts.front().digest.empty();
    if (with_digests) {
      digests = gather_digests();
      tensors.push_back({format::kColumnDigest,
                         DType::U8,
                         {static_cast<int64_t>(n_), format::kDigestBytes},
                         [&](ByteSink& sink) { sink.write(digests); }});
    }
    std::map<std::string, std::string> metadata{{"format", std::string(format::kColumnFormat)},
                                                {"column", o_.name},
                                                {"num_samples", std::to_string(n_)},
                                                {"labels_crc32", id.labels_crc32},
                                                {"world", std::to_string(world_)},
                                                {"fn", parts.front().fn},
                                                {"tool", parts.front().tool},
                                                {"merged_by", std::string("tarmac ") + kVersion},
                                                {"values_crc32", crc32_hex(values_crc.value())},
                                                {"offsets_crc32", crc32_hex(crc_of(offsets))},
                                                {"shapes_crc32", crc32_hex(crc_of(shapes))},
                                                {"fn_version", parts.front().fn_version},
                                                {"reused", std::to_string(reused_)}};
    if (with_digests) {
      metadata["digest"] = parts.front().digest;
      metadata["digest_crc32"] = crc32_hex(crc32_update(0, digests.data(), digests.size()));
    }
    r.reused = reused_;
    r.digests = with_digests;
    const fs::path final_path = r.path;
    const fs::path partial = dir_ / format::column_partial_file(o_.name);
    try {
      write_safetensors(partial.string(), std::move(tensors), metadata);
      atomic_rename(partial.string(), final_path.string());
      report("writing", total * esz, total * esz, true);
    } catch (...) {
      std::error_code ec;
      fs::remove(partial, ec);
      throw;
    }
    r.bytes = fs::file_size(final_path);
    // Recorded in the manifest, so that verify notices the file deleted or replaced.
    format::ManifestColumn record{r.bytes, metadata.at("values_crc32"),
                                  metadata.at("offsets_crc32"), metadata.at("shapes_crc32")};
    update_manifest(dir_, [&](format::Manifest& m) { m.set_column(o_.name, record); });
  }

  const ColumnMergeOptions& o_;
  fs::path dir_;
  uint64_t n_ = 0;
  uint64_t world_ = 0;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<Source> sources_;
  DType dtype_ = DType::U8;
  size_t ndim_ = 0;
  bool have_kind_ = false;
  bool all_digests_ = true;  // every chunk holds digests of one scheme: the column gets them
  uint64_t reused_ = 0;
  uint64_t read_bytes_ = 0;
  std::chrono::steady_clock::time_point t0_, last_report_;
};

}  // namespace

ColumnMergeResult merge_column(const ColumnMergeOptions& options) {
  return Merger(options).run();
}

namespace {

// A merged column file's summary, and what is wrong with it for this dataset (constant time:
// the bytes are checked by `tarmac verify`).
void describe_merged(const fs::path& file, const DatasetIdentity& id, ColumnInfo& c) {
  c.merged = true;
  try {
    const MappedFile map(file.string());
    c.bytes = map.bytes().size();
    const SafetensorsHeader h = parse_safetensors(map.bytes());
    const format::ColumnLayout l = format::read_column_layout(h);
    c.samples = l.num_samples;
    c.dtype = std::string(dtype_name(l.dtype));
    c.shape =
        l.uniform_shape ? shape_text(*l.uniform_shape) : "ragged, " + std::to_string(l.ndim) + "-D";
    c.fn = l.fn;
    if (l.name != c.name)
      c.problem = "the file says it is column '" + l.name + "'";
    else if (l.labels_crc32 != id.labels_crc32 || l.num_samples != id.num_samples)
      c.problem = "computed from another version of the dataset (annotation file CRC-32 " +
                  l.labels_crc32 + ", now " + id.labels_crc32 + "): derive it again";
  } catch (const std::exception& e) {
    c.problem = e.what();
  }
}

void describe_parts(const fs::path& parts_dir, ColumnInfo& c) {
  try {
    const std::vector<PartRecord> parts = read_part_records(parts_dir);
    for (const PartRecord& p : parts) {
      c.part_world = std::max(c.part_world, p.world);
      c.part_done += p.done;
      c.part_ranks += 1;
      c.part_ranks_complete += p.complete ? 1 : 0;
      if (c.fn.empty()) c.fn = p.fn;
    }
  } catch (const std::exception& e) {
    if (c.problem.empty()) c.problem = e.what();
  }
}

}  // namespace

std::vector<ColumnInfo> list_columns(const std::string& dir) {
  const DatasetIdentity id = dataset_identity(dir);
  std::map<std::string, ColumnInfo> by_name;
  const fs::path columns = fs::path(dir) / format::kColumnsDir;
  std::error_code ec;
  for (fs::directory_iterator it(columns, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name;
    const format::ColumnEntry kind = format::column_entry(it->path().filename().string(), &name);
    if (kind == format::ColumnEntry::Merged || kind == format::ColumnEntry::Parts) {
      ColumnInfo& c = by_name[name];
      c.name = name;
      if (kind == format::ColumnEntry::Merged)
        describe_merged(it->path(), id, c);
      else
        describe_parts(it->path(), c);
    }
  }
  std::vector<ColumnInfo> out;
  for (auto& [name, c] : by_name) {
    if (!c.merged && c.problem.empty())
      c.problem = "not merged: " + std::to_string(c.part_done) + " of " +
                  std::to_string(id.num_samples) + " samples computed, " +
                  std::to_string(c.part_ranks_complete) + " of " + std::to_string(c.part_world) +
                  " ranks complete";
    out.push_back(std::move(c));
  }
  return out;
}

void remove_column(const std::string& dir, const std::string& name, const std::string& command) {
  if (!format::is_valid_column_name(name))
    throw ArgumentError("'" + printable(name) + "' is not a column name (format.md 8)");
  const fs::path file = fs::path(dir) / format::column_file(name);
  const fs::path parts = fs::path(dir) / format::column_parts_dir(name);
  bool is_recorded = false;
  try {
    const auto m = format::read_manifest(dir);
    is_recorded = m && m->column(name);
  } catch (const ParseError&) {  // verify names it; the files can still be removed
  }
  if (!fs::exists(file) && !fs::exists(parts) && !is_recorded) {
    std::string names;
    for (const ColumnInfo& c : list_columns(dir)) names += (names.empty() ? "" : ", ") + c.name;
    throw FatalError(
        "'" + dir + "' has no column '" + name + "'" +
        (names.empty() ? std::string(" (it has no columns)") : " (it has: " + names + ")"));
  }
  OutputLock lock(dir, command);
  std::error_code ec;
  fs::remove(file, ec);
  if (ec) throw FatalError("cannot remove '" + file.string() + "': " + ec.message());
  fs::remove_all(parts, ec);
  if (ec) throw FatalError("cannot remove '" + parts.string() + "': " + ec.message());
  if (is_recorded)
    update_manifest(dir, [&](format::Manifest& m) { m.set_column(name, std::nullopt); });
}

}  // namespace tarmac
