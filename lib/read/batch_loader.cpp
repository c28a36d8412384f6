#include "read/batch_loader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/imgproc.hpp>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "format/json_object.h"
#include "format/manifest.h"
#include "read/geometry.h"
#include "transform/affine_warp.h"
#include "transform/image_codec.h"
#include "transform/jpeg_region.h"
#include "transform/png_region.h"
#include "transform/warp.h"

namespace tarmac {
namespace {

// A dense map as a batch takes it: a .npy map's array in place, a PNG (or other image) map
// decoded with its channels and bit depth; channels 0 for a 2-d map.
struct DenseMap {
  DType dtype = DType::U8;
  int64_t channels = 0;
  int width = 0, height = 0;
  std::span<const uint8_t> bytes;  ///< into the shard's map, or into `decoded`
  std::vector<uint8_t> decoded;
};

DenseMap dense_map(const Dataset& ds, size_t i, const std::string& kind) {
  DenseMap m;
  if (ds.encoding(i, kind) == BlobEncoding::Npy) {
    const TensorView v = ds.dense_array(i, kind);
    m.dtype = v.dtype;
    m.channels = v.shape.ndim == 3 ? v.shape[2] : 0;
    m.height = static_cast<int>(v.shape[0]);
    m.width = static_cast<int>(v.shape[1]);
    m.bytes = v.bytes;
    return m;
  }
  Pixels p = ds.decode_dense(i, kind);
  m.dtype = p.dtype;
  m.channels = p.channels == 1 ? 0 : p.channels;
  m.width = p.width;
  m.height = p.height;
  m.decoded = std::move(p.data);
  m.bytes = m.decoded;
  return m;
}

// "NAME", "NAME:xywh" or "NAME:xyxy" -> (NAME, xyxy).
std::pair<std::string, bool> parse_box(const std::string& spec) {
  for (const char* suffix : {":xywh", ":xyxy"})
    if (spec.size() > 5 && spec.ends_with(suffix))
      return {spec.substr(0, spec.size() - 5), suffix[3] == 'x'};
  return {spec, false};
}

// flip_pairs name points along the joint axis (the second to last) of field `name`.
void check_pairs(const std::string& name, const char* kind, const std::vector<int64_t>& shape,
                 const std::vector<std::pair<int, int>>& pairs) {
  const int64_t joints = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  for (const auto& [i, j] : pairs)
    if (std::max(i, j) >= joints)
      throw ArgumentError("augment flip_pairs pair (" + std::to_string(i) + ", " +
                          std::to_string(j) + ") is out of range for " + kind + " field '" + name +
                          "' of " + std::to_string(joints) + " points");
}

}  // namespace

void BatchLoader::check_geometry(const Dataset& ds, Gather& g, const FieldSpec& f) const {
  const std::vector<int64_t>& s = f.shape;
  const std::string where = "field '" + g.name + "' of '" + ds.path() + "'";
  switch (g.geo.kind) {
    case AugmentGeometry::Kind::Points3d:
      if (s.empty() || s.back() < 3)
        throw ArgumentError("points3d " + where +
                            " needs at least 3 values (x, y, z) on its last axis");
      g.kind = Gather::Points3d;
      check_pairs(g.name, "points3d", s, opt_.augment->flip_pairs);
      break;
    case AugmentGeometry::Kind::Camera: {
      const bool fits = g.geo.matrix ? s.size() >= 2 && s.back() == 3 && s[s.size() - 2] == 3
                                     : !s.empty() && s.back() == 4;
      if (!fits)
        throw ArgumentError("camera " + where + " is " + shape_text(s) + ", not " +
                            (g.geo.matrix ? "[3, 3] (K)" : "[4] (fx, fy, cx, cy)"));
      g.kind = Gather::Camera;
      break;
    }
    case AugmentGeometry::Kind::AxisAngle: {
      const int64_t j = g.geo.joints;
      const bool fits = g.geo.layout == "root"
                            ? !s.empty() && s.back() == 3
                            : (s.size() == 1 && s[0] == 3 * j) ||
                                  (s.size() >= 2 && s.back() == 3 && s[s.size() - 2] == j);
      if (!fits)
        throw ArgumentError("axis_angle " + where + " is " + shape_text(s) +
                            ", which does not fit layout " + g.geo.layout + " (" +
                            std::to_string(j) + " joints: [" + std::to_string(j) + ", 3] or [" +
                            std::to_string(3 * j) + "])");
      if (!g.geo.partner.empty()) {
        g.partner = ds.find_field(g.geo.partner);
        if (!g.partner || g.partner->ragged || g.partner->dtype != f.dtype ||
            g.partner->shape != f.shape)
          throw ArgumentError("axis_angle " + where + " names partner '" + g.geo.partner +
                              "' (the other hand, exchanged by a flip), which is not a field of "
                              "the same dtype and shape");
      }
      g.kind = Gather::AxisAngle;
      break;
    }
    case AugmentGeometry::Kind::Polygons:  // a fixed count of vertices: x0, y0, x1, y1, ...
      if (s.empty() || f.sample_bytes() / dtype_size(f.dtype) % 2 != 0)
        throw ArgumentError("polygons " + where + " is " + shape_text(s) +
                            ": an odd number of coordinates (x0, y0, x1, y1, ...)");
      g.kind = Gather::Polygons;
      break;
    default:
      break;
  }
}

struct BatchLoader::AugmentFields {
  std::set<std::string> points;
  std::map<std::string, std::pair<bool, bool>> boxes;  // name -> (xyxy, edges)
  std::map<std::string, AugmentGeometry> declared;
  std::map<std::string, std::string> unknown;  // fields of a geometric kind not known here
};

BatchLoader::AugmentFields BatchLoader::augment_fields() const {
  const Dataset& ds = ds_;
  AugmentFields af;
  DeclaredFields read = declared_geometry(ds);
  af.declared = std::move(read.fields);
  af.unknown = std::move(read.unknown);
  // Boxes named here but declared nowhere take the manifest's convention (its record).
  const bool manifest_edges = read.manifest_box_edges;
  // Declared fields since dropped (convert --fields) are left out; fields named here must exist.
  if (opt_.points) {
    for (const std::string& p : *opt_.points)
      if (ds.find_field(p))
        af.points.insert(p);
      else
        throw ArgumentError("points field '" + p + "' is not a field of '" + ds.path() + "'");
  } else {
    for (const auto& [name, g] : af.declared)
      if (g.kind == AugmentGeometry::Kind::Points && ds.find_field(name)) af.points.insert(name);
  }
  if (opt_.boxes) {
    for (const std::string& b : *opt_.boxes) {
      auto [name, xyxy] = parse_box(b);
      if (!ds.find_field(name))
        throw ArgumentError("boxes field '" + name + "' is not a field of '" + ds.path() + "'");
      const auto it = af.declared.find(name);
      const bool declared_box =
          it != af.declared.end() && it->second.kind == AugmentGeometry::Kind::Boxes;
      af.boxes[name] = {xyxy, declared_box ? it->second.edges : manifest_edges};
    }
  } else {
    for (const auto& [name, g] : af.declared)
      if (g.kind == AugmentGeometry::Kind::Boxes && ds.find_field(name))
        af.boxes[name] = {g.xyxy, g.edges};
  }
  return af;
}

BatchLoader::Gather BatchLoader::gather_for(const std::string& name,
                                            const AugmentFields& af) const {
  const Dataset& ds = ds_;
  const auto& kinds = ds.blob_kinds();
  Gather g;
  g.name = name;
  if (opt_.augment && name == "__augment__") {
    g.kind = Gather::Matrix;
    g.bytes = 6 * sizeof(double);
  } else if (opt_.augment && name == "__flip__") {
    g.kind = Gather::Flip;
    g.bytes = 1;
  } else if (opt_.augment && name != format::kImageBlob &&
             std::find(kinds.begin(), kinds.end(), name) != kinds.end()) {
    g.kind = Gather::Dense;
    if (ds.size() > 0) {  // one dtype and channel count per kind: sample 0's
      const DenseMap m = dense_map(ds, 0, name);
      g.dtype = m.dtype;
      g.channels = m.channels;
    }
    g.bytes = uint64_t(opt_.width) * uint64_t(opt_.height) *
              uint64_t(std::max<int64_t>(g.channels, 1)) * dtype_size(g.dtype);
  } else {
    const FieldSpec* f = ds.find_field(name);
    if (!f) throw ArgumentError("dataset '" + ds.path() + "' has no field '" + name + "'");
    if (f->ragged)
      throw ArgumentError("field '" + name + "' is ragged; only fixed-shape fields can be batched");
    g.field = f;
    g.bytes = f->sample_bytes();
    if (const auto u = af.unknown.find(name); u != af.unknown.end())
      throw ArgumentError("field '" + name + "' declares a geometry " + u->second +
                          " of a kind this tarmac cannot move with the image (points, boxes, "
                          "points3d, axis_angle, camera, polygons): leave it out of fields= "
                          "to augment, or read it with the tarmac that wrote the dataset");
    const bool is_box = af.boxes.count(name) > 0;
    const auto geo = af.declared.find(name);
    const bool other = !is_box && !af.points.count(name) && geo != af.declared.end() &&
                       (geo->second.kind == AugmentGeometry::Kind::Points3d ||
                        geo->second.kind == AugmentGeometry::Kind::AxisAngle ||
                        geo->second.kind == AugmentGeometry::Kind::Camera ||
                        geo->second.kind == AugmentGeometry::Kind::Polygons);
    if (other &&
        (f->kind != FieldKind::Numeric || (f->dtype != DType::F32 && f->dtype != DType::F64)))
      throw ArgumentError("field '" + name + "' must be F32 or F64 to be augmented, not " +
                          std::string(dtype_name(f->dtype)));
    if (af.points.count(name) || is_box) {
      const size_t need = is_box ? 4 : 2;
      if (f->kind != FieldKind::Numeric || (f->dtype != DType::F32 && f->dtype != DType::F64) ||
          f->shape.empty() || f->shape.back() < int64_t(need))
        throw ArgumentError(std::string(is_box ? "boxes" : "points") + " field '" + name +
                            "' must be F32 or F64 with at least " + std::to_string(need) +
                            " values on its last axis to be augmented");
    }
    if (is_box) {
      g.kind = Gather::Boxes;
      std::tie(g.xyxy, g.edges) = af.boxes.at(name);
    } else if (af.points.count(name)) {
      g.kind = Gather::Points;
      check_pairs(name, "points", f->shape, opt_.augment->flip_pairs);
    } else if (other) {
      g.geo = geo->second;
      check_geometry(ds, g, *f);
    }
  }
  return g;
}

BatchLoader::BatchLoader(const Dataset& ds, BatchOptions options)
    : ds_(ds), opt_(std::move(options)) {
  if (opt_.width < 0 || opt_.height < 0 || (opt_.width == 0) != (opt_.height == 0))
    throw ArgumentError("batch image size must be positive (or 0x0 for no images)");
  if (opt_.channels != 1 && opt_.channels != 3)
    throw ArgumentError("batch channels must be 1 or 3");
  if (opt_.width > 0 && !ds.has_images())
    throw ArgumentError("dataset '" + ds.path() + "' has no images to batch");
  AugmentFields af;
  if (opt_.augment) {
    const Augment& a = *opt_.augment;
    check_augment(a);
    if ((opt_.width || opt_.height) && (opt_.width != a.width || opt_.height != a.height))
      throw ArgumentError("batch size " + std::to_string(opt_.width) + "x" +
                          std::to_string(opt_.height) + " differs from the augment's size " +
                          std::to_string(a.width) + "x" + std::to_string(a.height));
    if (!ds.has_images())
      throw ArgumentError("dataset '" + ds.path() + "' has no images to augment");
    opt_.width = a.width;
    opt_.height = a.height;
    af = augment_fields();
  }
  for (const std::string& name : opt_.fields) gathers_.push_back(gather_for(name, af));
  unsigned n =
      opt_.threads > 0 ? unsigned(opt_.threads) : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned k = 0; k < n; ++k) threads_.emplace_back([this] { work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchLoader::start(std::vector<int64_t> indices, BatchBuffers out, uint64_t seed,
                        uint64_t epoch) {
  const size_t n = indices.size();
  const size_t image_bytes = size_t(opt_.width) * size_t(opt_.height) * size_t(opt_.channels);
  if (out.images.size() != n * image_bytes)
    throw ArgumentError("batch image buffer holds " + std::to_string(out.images.size()) +
                        " bytes, " + std::to_string(n * image_bytes) + " needed");
  if (out.labels.size() != gathers_.size())
    throw ArgumentError("batch needs one label buffer per field");
  for (size_t k = 0; k < gathers_.size(); ++k)
    if (out.labels[k].size() != n * gathers_[k].bytes)
      throw ArgumentError("batch buffer of field '" + gathers_[k].name + "' holds " +
                          std::to_string(out.labels[k].size()) + " bytes, " +
                          std::to_string(n * gathers_[k].bytes) + " needed");
  for (int64_t i : indices)
    if (i < 0 || uint64_t(i) >= ds_.size())
      throw IndexError("batch index " + std::to_string(i) + " is out of range for " +
                       std::to_string(ds_.size()) + " samples");
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return !busy_; });
  indices_ = std::move(indices);
  out_ = std::move(out);
  seed_ = seed;
  epoch_ = epoch;
  next_ = finished_ = 0;
  error_ = nullptr;
  busy_ = n > 0;
  ++generation_;
  lock.unlock();
  wake_.notify_all();
}

void BatchLoader::wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void BatchLoader::load(std::vector<int64_t> indices, BatchBuffers out, uint64_t seed,
                       uint64_t epoch) {
  start(std::move(indices), std::move(out), seed, epoch);
  wait();
}

void BatchLoader::do_sample(size_t j) {
  const auto i = static_cast<size_t>(indices_[j]);
  if (opt_.augment) return augment_sample(j, i);
  if (opt_.width > 0) {
    const size_t bytes = size_t(opt_.width) * size_t(opt_.height) * size_t(opt_.channels);
    ds_.decode_into(i, out_.images.subspan(j * bytes, bytes), opt_.width, opt_.height, opt_.resize,
                    opt_.channels);
  }
  for (size_t k = 0; k < gathers_.size(); ++k) {
    const TensorView v = ds_.value(gathers_[k].name, i);
    std::memcpy(out_.labels[k].data() + j * v.bytes.size(), v.bytes.data(), v.bytes.size());
  }
}

void BatchLoader::augment_sample(size_t j, size_t i) {
  const Augment& a = *opt_.augment;
  const auto [width, height] = ds_.decoded_size(i);
  const cv::Size p(width, height);  // the stored image's, as decode() gives it
  const AugmentDraw d = draw_augment(a, p.width, p.height, seed_, epoch_, i);
  const size_t bytes = size_t(opt_.width) * size_t(opt_.height) * size_t(opt_.channels);
  augment_image(i, d, out_.images.subspan(j * bytes, bytes));
  for (size_t k = 0; k < gathers_.size(); ++k) {
    const Gather& g = gathers_[k];
    const std::span<uint8_t> to = out_.labels[k].subspan(j * g.bytes, g.bytes);
    switch (g.kind) {
      case Gather::Matrix:
        std::memcpy(to.data(), d.m.data(), g.bytes);
        break;
      case Gather::Flip:
        to[0] = d.flip ? 1 : 0;
        break;
      case Gather::Dense:
        augment_dense(i, g, d, p.width, p.height, to);
        break;
      case Gather::Value:
      case Gather::Points:
      case Gather::Boxes: {
        const TensorView v = ds_.value(g.name, i);
        std::memcpy(to.data(), v.bytes.data(), v.bytes.size());
        // A nullable field's missing value stays zeros (NAME.valid says it is none).
        if (g.kind == Gather::Value || (g.field->nullable && !ds_.has_value(g.name, i))) break;
        if (g.kind == Gather::Points)
          augment_points(d, a, v.dtype, v.shape.span(), to);
        else
          augment_boxes(d, v.dtype, v.shape.span(), g.xyxy, g.edges, to);
        break;
      }
      case Gather::Polygons: {
        const TensorView v = ds_.value(g.name, i);
        std::memcpy(to.data(), v.bytes.data(), v.bytes.size());
        if (g.field->nullable && !ds_.has_value(g.name, i)) break;
        // Every vertex mapped as a point; vertex order (and so orientation) as stored.
        const int64_t vertex[] = {int64_t(v.bytes.size() / dtype_size(v.dtype) / 2), 2};
        augment_points(d, Augment{}, v.dtype, vertex, to);
        break;
      }
      case Gather::Points3d:
      case Gather::AxisAngle:
      case Gather::Camera: {
        if (g.field->nullable && !ds_.has_value(g.name, i)) {  // zeros, NAME.valid says none
          std::memcpy(to.data(), ds_.value(g.name, i).bytes.data(), g.bytes);
          break;
        }
        // A flip exchanges the two hands: this field takes its partner's value, mirrored.
        const bool swap = g.kind == Gather::AxisAngle && g.partner && d.flip;
        if (swap && g.partner->nullable && !ds_.has_value(g.partner->name, i))
          throw DataError("dataset '" + ds_.path() + "': sample " + std::to_string(i) + " has " +
                          g.name + " but not its partner " + g.partner->name +
                          ", which a flip exchanges it with");
        const TensorView v = ds_.value(swap ? g.partner->name : g.name, i);
        std::memcpy(to.data(), v.bytes.data(), v.bytes.size());
        if (g.kind == Gather::Points3d)
          augment_points3d(d, a, v.dtype, v.shape.span(), to);
        else if (g.kind == Gather::Camera)
          augment_camera(d, v.dtype, g.geo.matrix, g.geo.edges, to);
        else
          augment_axis_angle(d, v.dtype, g.geo.layout == "root" ? 1 : g.geo.joints, g.geo.pairs,
                             g.geo.rotates_root(), to);
        break;
      }
    }
  }
}

void BatchLoader::augment_dense(size_t i, const Gather& g, const AugmentDraw& d, int image_w,
                                int image_h, std::span<uint8_t> to) const {
  const DenseMap m = dense_map(ds_, i, g.name);
  if (m.dtype != g.dtype || m.channels != g.channels)
    throw DataError("dataset '" + ds_.path() + "': sample " + std::to_string(i) + "'s " + g.name +
                    " is " + std::string(dtype_name(m.dtype)) + " with " +
                    std::to_string(std::max<int64_t>(m.channels, 1)) + " channels, sample 0's is " +
                    std::string(dtype_name(g.dtype)) + " with " +
                    std::to_string(std::max<int64_t>(g.channels, 1)) + ": a batch needs one");
  if (m.width != image_w || m.height != image_h)
    throw DataError("dataset '" + ds_.path() + "': sample " + std::to_string(i) + "'s " + g.name +
                    " is " + std::to_string(m.width) + "x" + std::to_string(m.height) +
                    ", its image " + std::to_string(image_w) + "x" + std::to_string(image_h));
  const size_t pixel_bytes = g.bytes / (size_t(opt_.width) * size_t(opt_.height));
  const std::vector<uint8_t> w =
      warp_dense_bytes(m.bytes, m.width, m.height, pixel_bytes, d.m, opt_.width, opt_.height);
  std::memcpy(to.data(), w.data(), g.bytes);
}

TensorView BatchLoader::field_layout(size_t k) const {
  const Gather& g = gathers_.at(k);
  TensorView v;
  std::vector<int64_t> shape;
  switch (g.kind) {
    case Gather::Matrix:
      v.dtype = DType::F64;
      shape = {2, 3};
      break;
    case Gather::Flip:
      v.dtype = DType::BOOL;
      break;
    case Gather::Dense:
      v.dtype = g.dtype;
      shape = {opt_.height, opt_.width};
      if (g.channels) shape.push_back(g.channels);
      break;
    case Gather::Value:
    case Gather::Points:
    case Gather::Boxes:
    case Gather::Points3d:
    case Gather::AxisAngle:
    case Gather::Camera:
    case Gather::Polygons:
      v.dtype = g.field->dtype;
      shape = g.field->shape;
      break;
  }
  v.shape.ndim = shape.size();
  std::copy(shape.begin(), shape.end(), v.shape.dims.begin());
  return v;
}

// One warp (cv::warpAffine's bytes, faster: transform/affine_warp.h) from the stored pixels to
// the output, reading only what it needs: for a JPEG the rows and columns its taps touch at the
// smallest DCT scale that leaves the warp shrinking (the map composed with the region's offset
// and scale), for a PNG the rows up to the last one it touches. Other images (and an output
// wholly outside its image) are decoded whole.
void BatchLoader::augment_image(size_t i, const AugmentDraw& d, std::span<uint8_t> out) const {
  const Augment& a = *opt_.augment;
  const std::span<const uint8_t> blob = ds_.image(i);
  const BlobEncoding enc = ds_.encoding(i);
  cv::Mat src;                                // what the warp reads
  Affine m = d.m;                             // src pixels -> output
  int convert = -1;                           // the colour conversion after the warp, if any
  Pixels whole;                               // a whole decode's pixels, which `src` then wraps
  thread_local std::vector<uint8_t> scratch;  // a JPEG region's pixels: one warm buffer
  try {
    if (enc == BlobEncoding::Jpeg || enc == BlobEncoding::Png) {
      const ImageHeader h = probe_image(blob);
      if (enc == BlobEncoding::Jpeg && !h.cmyk && h.orientation == 1) {
        const AugmentSource s = augment_source(d.m, opt_.width, opt_.height, h.width, h.height, 8);
        if (!s.empty()) {
          // Regions up to 4 MiB (1,180² RGB) reuse the thread's buffer; larger ones, rare, are
          // not kept for the thread's life.
          const bool reuse = size_t(s.x1 - s.x0 + 16) * size_t(s.y1 - s.y0) * 3 <= (4u << 20);
          const ScaledRegion r = decode_jpeg_scaled(
              blob, h.width, h.height, s.denom, cv::Rect(s.x0, s.y0, s.x1 - s.x0, s.y1 - s.y0),
              h.grey ? JpegPixels::Grey : JpegPixels::Rgb, reuse ? &scratch : nullptr);
          src = r.pixels;
          m = compose(d.m, r.to_full());
        }
      } else if (enc == BlobEncoding::Png && png_region_decodable(blob)) {
        const AugmentSource s = augment_source(d.m, opt_.width, opt_.height, h.width, h.height, 1);
        // The whole image's matrix with the rect filled: the warp reads it with the draw's map.
        std::optional<cv::Mat> bgr;
        if (!s.empty())
          bgr = decode_png_region(blob, PngLayout::Bgr8,
                                  cv::Rect(s.x0, s.y0, s.x1 - s.x0, s.y1 - s.y0),
                                  uint64_t(h.width) * uint64_t(h.height));
        if (bgr) {
          src = *bgr;
          // Channel order commutes with the warp; a grey PNG's three channels are equal, so its
          // grey and RGB are exactly what the whole decode's grey gives.
          convert = opt_.channels == 1 ? cv::COLOR_BGR2GRAY : cv::COLOR_BGR2RGB;
        }
      }
    }
  } catch (const ParseError& e) {
    throw DataError("dataset '" + ds_.path() + "': sample " + std::to_string(i) + " (" +
                    std::string(ds_.key(i)) + ") image: " + e.what());
  }
  if (src.empty()) {
    whole = ds_.decode(i);
    src = cv::Mat(whole.height, whole.width, CV_8UC(whole.channels), whole.data.data());
  }
  if (convert < 0 && src.channels() != opt_.channels)
    convert = src.channels() == 1 ? cv::COLOR_GRAY2RGB : cv::COLOR_RGB2GRAY;
  cv::Mat dst(opt_.height, opt_.width, CV_8UC(opt_.channels), out.data());
  const cv::Size size(opt_.width, opt_.height);
  if (convert < 0) {
    warp_affine_linear(src, dst, m, size, a.fill);
  } else {
    cv::Mat warped;
    warp_affine_linear(src, warped, m, size, a.fill);
    cv::cvtColor(warped, dst, convert);
  }
}

void BatchLoader::work() {
  uint64_t seen = 0;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock,
               [&] { return stop_ || (busy_ && generation_ != seen && next_ < indices_.size()); });
    if (stop_) return;
    // Take samples one at a time until the batch is handed out; decoding runs unlocked.
    while (next_ < indices_.size()) {
      const size_t j = next_++;
      lock.unlock();
      std::exception_ptr err;
      try {
        do_sample(j);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (++finished_ == indices_.size()) {
        busy_ = false;
        done_.notify_all();
      }
    }
    seen = generation_;
  }
}

}  // namespace tarmac
