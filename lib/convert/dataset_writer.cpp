#include "convert/dataset_writer.h"

#include "common/error.h"
#include "format/layout.h"
#include "format/names.h"
#include "write/safetensors_writer.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace format;

namespace {

// The run's column spill file in `dir`: new, or cut back to where the checkpoint being resumed
// from (`resume`, the writer's part of it; null for a fresh run) left it.
std::unique_ptr<ColumnStore> open_store(const fs::path& dir,
                                        const format::CheckpointWriter* resume) {
  const std::string path = (dir / format::kSpillFile).string();
  if (!resume) return std::make_unique<ColumnStore>(path);
  return std::make_unique<ColumnStore>(path, resume->spill);
}

// How the image of every sample is stored under --format.
StoredEncoding image_encoding(OutputFormat f) {
  switch (f) {
    case OutputFormat::Jpeg:
      return StoredEncoding::Jpeg;
    case OutputFormat::Png:
      return StoredEncoding::Png;
    case OutputFormat::Webp:
      return StoredEncoding::Webp;
    case OutputFormat::Raw:
      return StoredEncoding::Raw;
    case OutputFormat::Keep:
      break;
  }
  return StoredEncoding::Source;
}

}  // namespace

// The blob columns of one stored kind (the image, or one dense map).
struct DatasetWriter::BlobColumns {
  SpillColumn *shard, *offset, *size, *crc32, *width, *height;
  BlobColumns(const std::string& prefix, ColumnStore& store) {
    auto make = [&](const char* what) { return &store.add(prefix + "." + what); };
    shard = make("shard");
    offset = make("offset");
    size = make("size");
    crc32 = make("crc32");
    width = make("width");
    height = make("height");
  }
  template <typename T>
  static void put(SpillColumn& c, DType t, T v) {
    c.append(t, {}, {reinterpret_cast<const uint8_t*>(&v), sizeof v});
  }
  void add(int32_t shard_index, int64_t off, const Blob& b) {
    put(*shard, DType::I32, shard_index);
    put(*offset, DType::I64, off);
    put(*size, DType::I64, static_cast<int64_t>(b.bytes.size()));
    put(*crc32, DType::U32, b.crc32);
    put(*width, DType::I32, static_cast<int32_t>(b.width));
    put(*height, DType::I32, static_cast<int32_t>(b.height));
  }
  void tensors(uint64_t n, std::vector<TensorSpec>& out) const {
    out.push_back(shard->fixed_tensor(DType::I32, {}, n));
    out.push_back(offset->fixed_tensor(DType::I64, {}, n));
    out.push_back(size->fixed_tensor(DType::I64, {}, n));
    out.push_back(crc32->fixed_tensor(DType::U32, {}, n));
    out.push_back(width->fixed_tensor(DType::I32, {}, n));
    out.push_back(height->fixed_tensor(DType::I32, {}, n));
  }
};

DatasetWriter::DatasetWriter(WriterSpec spec, fs::path staging,
                             const format::CheckpointWriter* resume)
    : spec_(std::move(spec)),
      staging_(std::move(staging)),
      schema_(spec_.ragged, spec_.geometry),
      store_(open_store(staging_, resume)),
      keys_(&store_->add(kKeyColumn)),
      affine_(spec_.images ? &store_->add(kAffineColumn) : nullptr) {
  if (spec_.images) {
    blobs_.emplace_back(kImageBlob, *store_);
    for (const auto& d : spec_.dense) blobs_.emplace_back(dense_blob_kind(d), *store_);
    for (const auto& m : spec_.masks) blobs_.emplace_back("__" + m + "__", *store_);
  }
  if (!resume) return;
  // parse_checkpoint checked the shard lists against each other.
  schema_.restore(resume->schema);
  samples_ = resume->samples;
  blob_bytes_ = resume->blob_bytes;
  key_bytes_ = resume->key_bytes;
  shard_names_ = resume->shards;
  shard_crcs_ = resume->shard_crcs;
  shard_sizes_ = resume->shard_sizes;
  shard_samples_ = resume->shard_samples;
  open_label_columns(true);
  store_->check_records(samples_);
  if (resume->open_shard)
    tar_ = std::make_unique<TarWriter>((staging_ / shard_names_.back()).string(),
                                       resume->open_shard->size, resume->open_shard->crc32);
}

DatasetWriter::~DatasetWriter() = default;

format::CheckpointWriter DatasetWriter::checkpoint() {
  format::CheckpointWriter w;
  w.samples = samples_;
  w.blob_bytes = blob_bytes_;
  w.key_bytes = key_bytes_;
  w.shards = shard_names_;
  w.shard_crcs = shard_crcs_;
  w.shard_sizes = shard_sizes_;
  w.shard_samples = shard_samples_;
  if (tar_) {
    tar_->sync();
    w.open_shard = format::CheckpointOpenShard{tar_->size(), tar_->crc32()};
  }
  w.spill = store_->checkpoint();
  w.schema = schema_.checkpoint();
  return w;
}

void DatasetWriter::add(ProcessedSample& s) {
  schema_.observe(s.fields);
  open_label_columns(false);  // a field new in this sample: its column, null until now
  key_bytes_ += s.key.size();
  keys_->append(DType::U8, std::vector<int64_t>{static_cast<int64_t>(s.key.size())},
                {reinterpret_cast<const uint8_t*>(s.key.data()), s.key.size()});
  // Every column gets a record: the sample's value, or none.
  std::vector<const SampleField*> by_column(label_cols_.size(), nullptr);
  for (const auto& f : s.fields) by_column[schema_.index(f.name)] = &f;
  for (size_t i = 0; i < label_cols_.size(); ++i) {
    if (const SampleField* f = by_column[i]; f && !f->value.null)
      label_cols_[i]->append(f->value.dtype, f->value.shape, f->value.data, f->value.kind);
    else
      label_cols_[i]->append_missing();
  }
  if (spec_.images) {
    affine_->append(DType::F64, std::vector<int64_t>{2, 3},
                    {reinterpret_cast<const uint8_t*>(s.affine.data()), sizeof(double) * 6});
    write_blobs(s);
  }
  ++samples_;
}

fs::path DatasetWriter::finish(const std::string& tool, const std::string& table_metadata) {
  if (tar_) close_shard();
  store_->finish();
  const uint64_t n = samples_;
  std::vector<TensorSpec> t;
  t.push_back(keys_->ragged_tensors(DType::U8, {}, key_bytes_, n)[0]);
  t.push_back(keys_->ragged_tensors(DType::U8, {}, key_bytes_, n)[1]);
  if (spec_.images) {
    t.push_back(affine_->fixed_tensor(DType::F64, {2, 3}, n));
    for (const auto& b : blobs_) b.tensors(n, t);
  }
  for (size_t i = 0; i < label_cols_.size(); ++i) {
    const FieldSchema& f = schema_.fields()[i];
    if (f.rerender) {  // fell back to JSON text: every value rendered, the length recounted
      for (auto& spec : label_cols_[i]->ragged_tensors(
               DType::U8, {}, label_cols_[i]->json_text_bytes(), n, /*as_json=*/true))
        t.push_back(std::move(spec));
    } else if (f.ragged) {
      std::vector<int64_t> inner(f.shape.begin() + 1, f.shape.end());
      for (auto& spec : label_cols_[i]->ragged_tensors(f.dtype, inner, f.total_first_axis, n))
        t.push_back(std::move(spec));
    } else {
      t.push_back(label_cols_[i]->fixed_tensor(f.dtype, f.shape, n));
    }
    if (f.nullable()) t.push_back(label_cols_[i]->valid_tensor(n));
  }
  LayoutMetadata lm;
  lm.num_samples = n;
  lm.fields = schema_.specs();
  lm.shards = shard_names_;
  lm.tool = tool;
  lm.classes = spec_.classes;
  if (!table_metadata.empty()) lm.table = table_metadata;
  if (spec_.images) {
    lm.blobs.emplace_back(kImageBlob, image_encoding(spec_.format));
    // A dense map is re-encoded as PNG when transformed, else kept as the source's bytes; a
    // .npy map is always stored as a canonical .npy.
    for (const auto& d : spec_.dense)
      lm.blobs.emplace_back(dense_blob_kind(d),
                            is_npy_dense(d) ? StoredEncoding::Npy : StoredEncoding::Source);
    // --masks: 0/1 PNGs, always re-encoded.
    for (const auto& m : spec_.masks) {
      lm.blobs.emplace_back("__" + m + "__", StoredEncoding::Png);
      lm.mask_blobs.push_back("__" + m + "__");
    }
  }
  const std::map<std::string, std::string> meta = layout_metadata(lm);
  fs::path path = staging_ / kLabelsFile;
  write_safetensors(path.string(), std::move(t), meta);
  return path;
}

void DatasetWriter::open_label_columns(bool resume) {
  for (size_t i = label_cols_.size(); i < schema_.fields().size(); ++i) {
    label_cols_.push_back(&store_->add(schema_.fields()[i].name));
    if (resume) continue;
    // New after `samples_` samples: those had no value.
    for (uint64_t k = 0; k < samples_; ++k) label_cols_.back()->append_missing();
  }
}

void DatasetWriter::close_shard() {
  tar_->finish();
  shard_crcs_.push_back(tar_->crc32());
  shard_sizes_.push_back(tar_->size());
  tar_.reset();
  shard_closed_ = true;
}

void DatasetWriter::write_blobs(const ProcessedSample& s) {
  std::vector<std::pair<std::string, const Blob*>> items;
  items.emplace_back(s.key + "." + s.image.member_suffix, &s.image);
  for (const auto& d : s.dense) items.emplace_back(s.key + "." + d.member_suffix, &d);
  if (tar_) {
    uint64_t need = 0;
    for (const auto& [name, b] : items) need += tar_->bytes_if_added(name, b->bytes.size());
    if (tar_->size() > 0 && tar_->size() + need + 1024 > spec_.shard_size) close_shard();
  }
  if (!tar_) {
    shard_names_.push_back(shard_name(shard_names_.size()));
    tar_ = std::make_unique<TarWriter>((staging_ / shard_names_.back()).string());
    shard_samples_.push_back(0);
  }
  ++shard_samples_.back();
  const int32_t shard = static_cast<int32_t>(shard_names_.size() - 1);
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t off = tar_->add(items[i].first, items[i].second->bytes);
    blobs_[i].add(shard, static_cast<int64_t>(off), *items[i].second);
    blob_bytes_ += items[i].second->bytes.size();
  }
}

}  // namespace tarmac
