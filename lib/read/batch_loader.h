#pragma once
// Decodes batches of samples with a thread pool into caller-provided contiguous buffers:
// images into one NHWC uint8 RGB array, fixed-shape label fields into one array each. One
// batch can be in flight while the caller consumes the previous one (start / wait). With an
// Augment, every sample is warped once to the output under its own random geometry, decoding
// only the part of the stored image the warp reads, and the points, boxes and dense maps asked
// for follow it (docs/reader.md, "Augmentation").
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "read/augment.h"
#include "read/dataset.h"
#include "read/geometry.h"

namespace tarmac {

struct BatchOptions {
  int width = 0;  ///< every image of a batch is width x height; 0 with height 0: no images
  int height = 0;
  /// Images of another size are resized (area when shrinking, bilinear otherwise) when
  /// true; when false (the default) they are a DataError, since label coordinates would
  /// no longer match the pixels.
  bool resize = false;
  int threads = 0;  ///< decoding threads; 0: the number of cores
  /// Fixed-shape fields to gather (schema fields or "__affine__"); ragged ones are refused.
  /// With `augment` also "__augment__" (F64 [2, 3]: stored pixels -> output), "__flip__" (BOOL)
  /// and dense maps ("__depth__": [height, width(, C)] of the stored dtype: a .npy map's own,
  /// U8 or U16 for a PNG one; sample 0's dtype and channels for the whole batch).
  std::vector<std::string> fields;
  /// Channels of every image in the batch, whatever is stored: 3 (RGB; grey images
  /// replicated) or 1 (grey; colour images converted with OpenCV's weights).
  int channels = 3;
  /// Random geometry per sample: images are augment->width x height (width and height above
  /// are then 0 or the same), drawn from (seed, epoch, index) given to start().
  std::optional<Augment> augment = std::nullopt;
  /// With augment: the fields among `fields` that are points, and boxes ("NAME" for x, y, w,
  /// h or "NAME:xyxy"); nullopt: those `convert --points` / `--boxes` declared (the manifest).
  std::optional<std::vector<std::string>> points = std::nullopt, boxes = std::nullopt;
};

/// Where one batch goes. `images` holds indices.size()*height*width*channels bytes; labels[k]
/// holds indices.size()*fields[k].sample_bytes bytes. The caller keeps them alive until
/// wait() returns.
struct BatchBuffers {
  std::span<uint8_t> images;
  std::vector<std::span<uint8_t>> labels;
};

/// A pool of decoding threads bound to one Dataset, which must outlive it. Not fork-safe:
/// a child process must make its own loader (the Dataset itself is fine after fork).
class BatchLoader {
 public:
  /// Throws ArgumentError for an unknown or ragged field, a bad size or augment (flip_pairs
  /// out of range for a points field included).
  BatchLoader(const Dataset& ds, BatchOptions options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  /// Starts loading `indices` into `out` in the background and returns at once. Waits for
  /// the batch in flight first. Throws ArgumentError for wrong buffer sizes and
  /// IndexError for an index >= size() before anything starts. `seed` and `epoch` choose the
  /// augmentation's draws (with options().augment; ignored without).
  void start(std::vector<int64_t> indices, BatchBuffers out, uint64_t seed = 0, uint64_t epoch = 0);
  /// Waits for the batch in flight; rethrows the first error of any sample (DataError...).
  void wait();
  /// start() then wait().
  void load(std::vector<int64_t> indices, BatchBuffers out, uint64_t seed = 0, uint64_t epoch = 0);

  const BatchOptions& options() const { return opt_; }
  /// Bytes of one sample's value of fields[k].
  uint64_t field_bytes(size_t k) const { return gathers_[k].bytes; }
  /// The dtype and per-sample shape of fields[k] (its bytes empty): what a caller allocates.
  TensorView field_layout(size_t k) const;

 private:
  /// What fields[k] is and how a sample's value of it is made.
  struct Gather {
    enum Kind { Value, Points, Boxes, Matrix, Flip, Dense, Points3d, AxisAngle, Camera, Polygons };
    Kind kind = Value;
    const FieldSpec* field = nullptr;  ///< every kind but Matrix, Flip, Dense
    std::string name;
    uint64_t bytes = 0;                  ///< per sample
    bool xyxy = false;                   ///< Boxes
    bool edges = false;                  ///< Boxes: pixel-edge coordinates
    AugmentGeometry geo;                 ///< Points3d, AxisAngle, Camera, Polygons
    const FieldSpec* partner = nullptr;  ///< AxisAngle: the field a flip exchanges it with
    DType dtype = DType::U8;             ///< Dense: the stored dtype
    int64_t channels = 0;                ///< Dense: 0 for (H, W), else C of (H, W, C)
  };
  /// The fields an augment moves: points, boxes, declared geometries (batch_loader.cpp).
  struct AugmentFields;
  /// What opt_.augment moves: the points and boxes fields named or declared (ArgumentError
  /// for a named one that is not a field), and every field's declared geometry.
  AugmentFields augment_fields() const;
  /// How the field `name` of opt_.fields is gathered; ArgumentError where it cannot be.
  Gather gather_for(const std::string& name, const AugmentFields& af) const;
  /// Checks field f's shape against g.geo (its declared kind) and sets g.kind: ArgumentError.
  void check_geometry(const Dataset& ds, Gather& g, const FieldSpec& f) const;
  void work();
  void do_sample(size_t j);
  void augment_sample(size_t j, size_t i);
  /// Sample i's dense map g warped by d into `to`; its image is image_w x image_h as stored.
  void augment_dense(size_t i, const Gather& g, const AugmentDraw& d, int image_w, int image_h,
                     std::span<uint8_t> to) const;
  /// Sample i's image under draw d into `out` (opt_.height x width x channels).
  void augment_image(size_t i, const AugmentDraw& d, std::span<uint8_t> out) const;

  const Dataset& ds_;
  BatchOptions opt_;
  std::vector<Gather> gathers_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  bool busy_ = false;
  uint64_t generation_ = 0;
  std::vector<int64_t> indices_;
  uint64_t seed_ = 0, epoch_ = 0;
  BatchBuffers out_;
  size_t next_ = 0, finished_ = 0;
  std::exception_ptr error_;
};

}  // namespace tarmac
