#include "convert/sample_processor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "convert/label_geometry.h"
#include "convert/npy_dense.h"
#include "convert/table_plan.h"
#include "format/names.h"
#include "labels/json_labels.h"
#include "labels/npy.h"
#include "labels/npz.h"
#include "labels/text_labels.h"
#include "source/class_scan.h"
#include "source/packed_member.h"
#include "transform/coco_mask.h"
#include "transform/jpeg_region.h"
#include "transform/png_region.h"
#include "transform/warp.h"
#include "write/column_store.h"

namespace tarmac {
namespace {

std::string last_component(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  return dot == std::string::npos ? ext : ext.substr(dot + 1);
}

// "caption.txt" -> "caption"; "txt" -> "txt".
std::string stem_or_self(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  return dot == std::string::npos ? ext : ext.substr(0, dot);
}

// "meta.json" -> "meta."; "json" -> "".
std::string prefix_of(const std::string& ext) {
  const size_t dot = ext.rfind('.');
  return dot == std::string::npos ? "" : ext.substr(0, dot + 1);
}

bool is_label_ext(const std::string& last) {
  return last == "json" || last == "npy" || last == "npz" || last == "txt" || last == "cls";
}

void parse_label_member(const Member& m, const std::string& ext, uint64_t max_label_size,
                        std::vector<SampleField>& out) {
  const std::string last = last_component(ext);
  const std::span<const uint8_t> bytes(m.data);
  auto add = [&](std::string name, FieldValue v) {
    for (const auto& f : out)
      if (f.name == name)
        throw SampleError("field '" + name + "' comes from both member '" + f.member +
                              "' and member '" + m.name + "'",
                          ErrorCode::BadField);
    out.push_back({std::move(name), m.name, ext, std::move(v)});
  };
  if (last == "json") {
    for (auto& [name, v] : parse_json_labels(bytes, prefix_of(ext), stem_or_self(ext)))
      add(name, std::move(v));
  } else if (last == "npz") {
    // Its arrays together, once inflated, are held to the limit of a label.
    for (auto& [name, v] : parse_npz(bytes, prefix_of(ext), max_label_size, "--max-label-size"))
      add(name, std::move(v));
  } else if (last == "npy") {
    add(stem_or_self(ext), parse_npy(bytes));
  } else if (last == "txt") {
    add(stem_or_self(ext), parse_txt(bytes));
  } else if (last == "cls") {
    add(stem_or_self(ext), parse_cls(bytes));
  }
}

// Refuses a source sample that would make more than --max-outputs-per-sample outputs: they
// are all held in memory until the writer takes them. "<subject> <count> <noun>, more than".
void check_output_count(uint64_t count, const std::string& subject, const char* noun,
                        const ConvertOptions& o) {
  if (count <= o.limits.max_outputs_per_sample) return;
  throw SampleError(subject + " " + std::to_string(count) + " " + noun +
                    ", more than --max-outputs-per-sample " +
                    std::to_string(o.limits.max_outputs_per_sample) +
                    " (the outputs of one sample are held in memory together); raise "
                    "--max-outputs-per-sample to convert it");
}

// --fields / --drop-fields, once the geometry has used what it needs.
void select_fields(std::vector<SampleField>& fields, const ConvertOptions& o) {
  if (o.labels.keep_fields.empty() && o.labels.drop_fields.empty()) return;
  auto listed = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  std::erase_if(fields, [&](const SampleField& f) {
    // Provenance and geometry, not labels: always kept.
    if (f.name == format::kRowField || f.name == format::kOriginalSizeField ||
        f.name == format::kCropTopLeftField || f.name == format::kTargetSizeField)
      return false;
    return (!o.labels.keep_fields.empty() && !listed(o.labels.keep_fields, f.name)) ||
           listed(o.labels.drop_fields, f.name);
  });
}

// The last dotted part of a field's name, lower-cased, is a common name of a geometric label:
// the flag that would declare it, else "".
std::string geometric_flag_for(const std::string& name) {
  std::string n = last_component(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.starts_with("bbox") || n.starts_with("box")) return "--boxes";
  if (n.starts_with("keypoints") || n.starts_with("kp") || n.starts_with("joints"))
    return n.find("3d") != std::string::npos ? "--points3d" : "--points";
  if (n == "segmentation") return "--polygons or --masks";
  if (n.find("pose") != std::string::npos || n.find("orient") != std::string::npos)
    return "--axis-angle";
  if (n == "k" || n == "intrinsics" || n.starts_with("cam")) return "--camera";
  return "";
}

// The code of a label member that does not parse, by its extension ("json", "smpl.npz").
ErrorCode label_error_code(const std::string& ext) {
  const std::string last = last_component(ext);
  if (last == "json") return ErrorCode::BadJson;
  if (last == "npy") return ErrorCode::BadNpy;
  if (last == "npz") return ErrorCode::BadNpz;
  return ErrorCode::BadText;
}

uint32_t crc_of(const std::vector<uint8_t>& b) {
  return crc32_of(b);
}

std::vector<uint8_t> encode_dense(const cv::Mat& m, const std::string& member) {
  const int depth = m.depth();
  if (depth != CV_8U && depth != CV_16U)
    throw SampleError("dense map '" + member +
                          "' has a pixel type tarmac cannot store losslessly as PNG (only 8- and "
                          "16-bit maps are supported)",
                      ErrorCode::BadDenseMap);
  return encode_image(m, OutputFormat::Png, 0);
}

// "'a', 'b' and 'c'" (at most `most` names, then "and N more").
std::string quoted_list(const std::vector<std::string>& names, size_t most = 8) {
  std::string text;
  const size_t shown = std::min(names.size(), most);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) text += i + 1 == shown && shown == names.size() ? " and " : ", ";
    text += "'" + names[i] + "'";
  }
  if (shown < names.size()) text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

// True for the part of a name between key and last extension that numbers a picture of its
// own ("000123", "01.01") rather than a member's role in the sample ("rgb", "depth").
bool looks_numbered(const std::string& middle) {
  return !middle.empty() && middle.find_first_of("0123456789") != std::string::npos &&
         middle.find_first_not_of("0123456789.-_") == std::string::npos;
}

// Several members whose last extension is an image's, none named by --image as a whole: which
// is the image? Numbered middle parts mean the key rule cut the names short.
SampleError several_images(const std::vector<std::pair<const Member*, std::string>>& found,
                           const std::string& key, KeyRule rule) {
  std::vector<std::string> names, exts;
  bool numbered = rule == KeyRule::FirstDot;
  for (const auto& [m, ext] : found) {
    names.push_back(m->name);
    exts.push_back(ext);
    numbered = numbered && looks_numbered(stem_or_self(ext));
  }
  std::sort(names.begin(), names.end());
  std::sort(exts.begin(), exts.end());
  std::string image_flags;
  for (size_t i = 0; i < exts.size() && i < 8; ++i)
    image_flags += (i ? " or --image " : "--image ") + exts[i];
  const std::string n = std::to_string(found.size());
  if (numbered)
    return SampleError(
        "sample has " + n + " image members whose names differ before the extension, " +
            quoted_list(names) +
            ": the key ends at the first dot of a name (--key-rule first-dot, WebDataset's "
            "rule), so they are all sample '" +
            key +
            "'; if each is a picture of its own, pass --key-rule last-dot to end keys at the "
            "last dot",
        ErrorCode::AmbiguousImage);
  return SampleError(
      "sample has " + n + " image members, " + quoted_list(names) +
          ", and nothing says which is the image: pass " + image_flags +
          " (and --dense for a map to keep with it)" +
          (rule == KeyRule::FirstDot ? "; if they are pictures of their own whose names hold dots, "
                                       "--key-rule last-dot"
                                     : ""),
      ErrorCode::AmbiguousImage);
}

// --classes-from-dirs: field `cls`, the index among the run's classes of the folder holding the
// image.
void add_class(const Member& image, const std::vector<std::string>& classes,
               std::vector<SampleField>& fields) {
  const std::string folder = parent_folder(image.name);
  if (folder.empty())
    throw SampleError("image member '" + image.name +
                          "' is in no folder, so it has no class (--classes-from-dirs takes the "
                          "class from the folder holding the image, as in ROOT/CLASS/IMAGE)",
                      ErrorCode::BadSample);
  const auto it = std::find(classes.begin(), classes.end(), folder);
  if (it == classes.end())
    throw SampleError("image member '" + image.name + "' is in folder '" + folder +
                          "', which is not among the run's classes (did the inputs change "
                          "during the run?)",
                      ErrorCode::BadSample);
  for (const auto& f : fields)
    if (f.name == format::kClassField)
      throw SampleError("field '" + f.name + "' comes from both member '" + f.member +
                            "' and the image's folder (--classes-from-dirs)",
                        ErrorCode::BadField);
  FieldValue v;
  v.kind = FieldValue::Kind::Numeric;
  v.dtype = DType::I64;
  const int64_t id = it - classes.begin();
  v.data.resize(sizeof id);
  std::memcpy(v.data.data(), &id, sizeof id);  // little-endian, as every tarmac target
  fields.push_back({format::kClassField, image.name, "dir", std::move(v)});
}

// What the sample has instead of an image.
SampleError no_image(const RawSample& raw, const std::vector<std::string>& image_exts) {
  std::vector<std::string> names;
  for (const auto& m : raw.members) names.push_back(m.name);
  std::string looked;
  for (size_t i = 0; i < image_exts.size(); ++i)
    looked += (i == 0 ? "." : i + 1 == image_exts.size() ? " or ." : ", .") + image_exts[i];
  return SampleError("sample has no image member (a name ending in " + looked +
                         "; --image names others); its members: " +
                         (names.empty() ? std::string("none") : quoted_list(names)),
                     ErrorCode::NoImage);
}

// Where in a sample the work is, for the message and code of what goes wrong there.
struct Context {
  const std::string* member = nullptr;  ///< the member being read, named in the message
  /// What a ParseError (or OpenCV's failure) from the current member means for the sample.
  ErrorCode parse_code = ErrorCode::BadSample;
};

// Runs `f`, turning what bad data throws into `out`'s error (FatalError goes through).
template <class F>
void guarded(ProcessedSample& out, Context& ctx, F&& f) {
  auto where = [&] { return ctx.member ? "member '" + *ctx.member + "': " : std::string(); };
  try {
    f();
  } catch (const ParseError& e) {
    out.error = where() + e.what();
    out.error_code = ctx.parse_code;
  } catch (const SampleError& e) {
    out.error = where() + e.what();
    out.error_code = e.code();
  } catch (const cv::Exception& e) {
    out.error = where() + "OpenCV failed: " + e.what();
    out.error_code = ctx.parse_code;
  } catch (const std::bad_alloc&) {
    out.error = where() + "out of memory while converting this sample";
    out.error_code = ErrorCode::OutOfMemory;
  }
}

void check_required(const std::vector<SampleField>& fields, const ConvertOptions& o) {
  for (const auto& name : o.labels.require_fields) {
    const auto it = std::find_if(fields.begin(), fields.end(),
                                 [&](const SampleField& f) { return f.name == name; });
    if (it == fields.end() || it->value.null)
      throw SampleError("required field '" + name + "' is " +
                            (it == fields.end() ? "missing" : "null") + " (--require " + name + ")",
                        ErrorCode::BadField);
  }
}

FieldValue int32_pair(int64_t a, int64_t b) {
  FieldValue r;
  r.dtype = DType::I32;
  r.shape = {2};
  const int32_t v[2] = {static_cast<int32_t>(a), static_cast<int32_t>(b)};
  r.data.resize(sizeof v);
  std::memcpy(r.data.data(), v, sizeof v);
  return r;
}

// The image and dense maps of a sample: probed once and decoded at most once, however many
// outputs (table rows, instances) are cut from them. With a single output, a JPEG in stored
// orientation, or a PNG, is decoded after the geometry is known, and only as far as the crop
// needs (jpeg_region.h, png_region.h; PNG dense maps too); otherwise the image is decoded
// whole first.
class ImageSource {
 public:
  /// `dense_suffixes`: each dense map's suffix in the shards ("depth.png"). Throws as the
  /// members' bytes require (guarded() turns that into the sample's error).
  ImageSource(const Member& image, std::vector<const Member*> dense,
              std::vector<std::string> dense_suffixes, const ConvertOptions& o, bool single,
              Context& ctx)
      : image_(image),
        dense_(std::move(dense)),
        suffixes_(std::move(dense_suffixes)),
        o_(o),
        single_(single),
        dense_mats_(dense_.size()) {
    check_channels_format(o.transform);
    ctx.member = &image.name;
    ctx.parse_code = ErrorCode::BadImage;
    hdr_ = probe_image(image.data);
    check_image_pixels(hdr_, o.limits.max_pixels);
    const bool plain_jpeg = hdr_.format == ImageFormat::Jpeg && !hdr_.cmyk && hdr_.width > 0;
    const bool region_png = hdr_.format == ImageFormat::Png && png_region_decodable(image.data);
    // --dedup hashes the whole decoded source: a JPEG's region decode then decodes it whole at
    // its own scale (render()); other images are decoded whole here.
    const bool hash = o.dedup.enabled();
    region_path_ = single && ((plain_jpeg && hdr_.orientation == 1) || (region_png && !hash)) &&
                   o.transform.format != OutputFormat::Keep;
    src_w_ = hdr_.display_width();
    src_h_ = hdr_.display_height();
    if (o.transform.format == OutputFormat::Keep && plain_jpeg && !hash) {
      validate_jpeg(image.data);
    } else if (!region_path_) {
      src_ = decode_image(image.data, o.limits.max_pixels);
      src_w_ = src_.cols;
      src_h_ = src_.rows;
    }
    if (hash && !region_path_) content_ = hash_of(src_);
    ctx.member = nullptr;
  }

  /// One output from `fields` (its labels): geometry, image, dense maps, transformed points
  /// and boxes, into `out`.
  void render(std::vector<SampleField>& fields, ProcessedSample& out, Context& ctx);

  /// The hashes --dedup compares `pixels` by (format.md 1.5): near needs the pHash only.
  ContentHash hash_of(const cv::Mat& pixels) const {
    if (o_.dedup.mode == DedupOptions::Mode::Near) return {{}, perceptual_hash(pixels)};
    return content_hash(pixels);
  }

  /// SDXL's micro-conditioning (format.md 1.4): original size, crop top-left, target size.
  void add_micro_conditioning(std::vector<SampleField>& fields, const Geometry& g) const {
    // The region's top-left edge: the original point M maps to the output's edge (-0.5, -0.5),
    // in pixel-centre coordinates, plus 0.5: the pixels cut away (0 when nothing is).
    const double left = (-0.5 - g.m[2]) / g.m[0] + 0.5;
    const double top = (-0.5 - g.m[5]) / g.m[4] + 0.5;
    const std::string source = "geometry";
    fields.push_back({format::kOriginalSizeField, image_.name, source, int32_pair(src_h_, src_w_)});
    fields.push_back({format::kCropTopLeftField, image_.name, source,
                      int32_pair(std::llround(top), std::llround(left))});
    fields.push_back(
        {format::kTargetSizeField, image_.name, source, int32_pair(g.out_height, g.out_width)});
  }

 private:
  const Member& image_;
  std::vector<const Member*> dense_;
  std::vector<std::string> suffixes_;
  const ConvertOptions& o_;
  ImageHeader hdr_;
  bool single_ = false;
  bool region_path_ = false;
  cv::Mat src_;
  std::optional<ContentHash> content_;  // --dedup; the region path's is taken in render()
  int src_w_ = 0, src_h_ = 0;
  std::vector<cv::Mat> dense_mats_;  // decoded on first use
};

void ImageSource::render(std::vector<SampleField>& fields, ProcessedSample& out, Context& ctx) {
  const ConvertOptions& o = o_;
  std::optional<Region> field_box;
  if (o.transform.geometry.crop == CropMode::Field) {
    ctx.member = nullptr;  // the field's own member is named in the message
    SampleField& f = numeric_field(fields, o.transform.crop_field, "crop box");
    if (f.value.num_elements() < 4 || f.value.shape.size() > 1)
      throw SampleError("crop box field '" + o.transform.crop_field + "' (member '" + f.member +
                            "') has shape " + shape_text(f.value.shape) +
                            "; it needs 4 numbers (x, y, w, h or x0, y0, x1, y1; more are "
                            "allowed after them, such as a confidence)",
                        ErrorCode::BadField);
    const std::vector<double> b = as_doubles(f.value);
    field_box = region_from_box(b.data(), o.transform.crop_field_xyxy);
  }
  ctx.member = &image_.name;
  ctx.parse_code = ErrorCode::BadImage;
  const Geometry g = compute_geometry(o.transform.geometry, src_w_, src_h_, field_box);
  // Before the output is allocated: the sizes --resize shorter/none and box crops leave to the
  // source (the flags' own bound was checked before the run, check_output_bound).
  check_output_size(g.out_width, g.out_height, o.transform, o.limits.max_pixels);
  out.affine = g.m;
  // A .npy label of the image's height and width is most likely a dense map (depth, a mask)
  // that --dense would have warped with the image; as a label it stays as it was.
  if (!g.identity)
    for (const SampleField& f : fields)
      if ((f.source == "npy" || f.source.ends_with(".npy")) && f.value.shape.size() >= 2 &&
          f.value.shape[0] == src_h_ && f.value.shape[1] == src_w_)
        out.image_sized_labels.push_back({f.name, f.source});

  if (o.transform.format == OutputFormat::Keep) {
    if (!g.identity)
      throw FatalError(
          "--format keep stores the source bytes untouched, so it cannot be "
          "combined with a crop or resize");
    out.image.bytes = image_.data;
    std::string k, ext;
    split_member_name(image_.name, k, ext, o.members.key_rule);
    out.image.member_suffix = ext;
  } else {
    cv::Mat warped;
    if (region_path_ && hdr_.format == ImageFormat::Png) {
      // The whole image's size, its region's pixels only: the warp is the full decode's.
      const cv::Rect need = g.identity
                                ? cv::Rect(0, 0, src_w_, src_h_)
                                : warp_source_rect(g.m, g.out_width, g.out_height, src_w_, src_h_);
      std::optional<cv::Mat> png =
          decode_png_region(image_.data, PngLayout::Bgr8, need, o.limits.max_pixels);
      const cv::Mat src = png ? *png : decode_image(image_.data, o.limits.max_pixels);
      warped =
          g.identity ? src : warp_image(src, g.m, g.out_width, g.out_height, o.transform.pad_value);
    } else if (region_path_) {
      thread_local std::vector<uint8_t> scratch;  // one warm buffer per worker, not a fresh one
      const ResampleMode mode = o.transform.geometry.resample;
      // --dedup: the region decode decodes the whole image at its scale, and the hashes are
      // taken of that (the output's pixels are the same as without --dedup). The exact digest
      // is of the full-scale pixels, and the pHash of the full or half scale (format.md 1.5:
      // at 1/4 or 1/8 it moves up to 8 bits): other scales cost a whole decode of their own.
      const bool hash = o.dedup.enabled(), near = o.dedup.mode == DedupOptions::Mode::Near;
      const int denom = region_dct_denom(g, mode);
      const bool shared = hash && (denom == 1 || (near && denom == 2));
      if (hash && !shared)
        content_ =
            hash_of(near ? decode_jpeg_scaled(image_.data, src_w_, src_h_, 2,
                                              cv::Rect(0, 0, src_w_, src_h_), JpegPixels::Bgr)
                               .pixels
                         : decode_image(image_.data, o.limits.max_pixels));
      cv::Mat whole;
      const RegionDecode rd = decode_jpeg_region(image_.data, src_w_, src_h_, g, mode, &scratch,
                                                 shared ? &whole : nullptr);
      if (shared) content_ = hash_of(whole);
      if (rd.pixels.empty())
        warped =
            cv::Mat(g.out_height, g.out_width, CV_8UC3, cv::Scalar::all(o.transform.pad_value));
      else if (rd.filter == ShrinkFilter::Cubic)
        warped = area_resample(rd.pixels, rd.m, g.out_width, g.out_height, o.transform.pad_value,
                               rd.filter);
      else
        warped = warp_image(rd.pixels, rd.m, g.out_width, g.out_height, o.transform.pad_value);
    } else {
      warped = g.identity ? src_
                          : warp_image(src_, g.m, g.out_width, g.out_height, o.transform.pad_value);
    }
    // Grey sources are decoded as 3 equal channels; OpenCV's BGR->grey weights (their
    // fixed-point values sum to exactly 1) give each grey value back unchanged.
    if (o.transform.channels == ChannelMode::One ||
        (o.transform.channels == ChannelMode::Keep && hdr_.grey)) {
      cv::Mat grey;
      cv::cvtColor(warped, grey, cv::COLOR_BGR2GRAY);
      warped = grey;
    }
    out.image.bytes = encode_image(warped.isContinuous() ? warped : warped.clone(),
                                   o.transform.format, o.transform.quality);
    out.image.member_suffix = format_extension(o.transform.format);
  }
  out.image.width = g.out_width;
  out.image.height = g.out_height;
  out.image.crc32 = crc_of(out.image.bytes);
  out.content = content_;

  for (size_t i = 0; i < dense_.size(); ++i) {
    const Member& member = *dense_[i];
    ctx.member = &member.name;
    ctx.parse_code = ErrorCode::BadDenseMap;
    Blob b;
    b.member_suffix = suffixes_[i];
    b.width = g.out_width;
    b.height = g.out_height;
    if (format::is_npy_dense(suffixes_[i])) {
      b.bytes = npy_dense_map(member.data, src_w_, src_h_, g, o.limits.max_pixels);
      b.crc32 = crc_of(b.bytes);
      out.dense.push_back(std::move(b));
      continue;
    }
    if (single_ && !g.identity && png_region_decodable(member.data)) {
      // One output: only the rows and columns the warp reads (png_region.h).
      const ImageHeader dh = probe_image(member.data);
      check_image_pixels(dh, o.limits.max_pixels);
      Affine m = g.m;
      if (dh.width != src_w_ || dh.height != src_h_)
        m = compose(g.m, dense_to_image(dh.width, dh.height, src_w_, src_h_));
      const cv::Rect need = warp_source_rect(m, g.out_width, g.out_height, dh.width, dh.height);
      if (std::optional<cv::Mat> d =
              decode_png_region(member.data, PngLayout::Unchanged, need, o.limits.max_pixels)) {
        b.bytes = encode_dense(warp_dense(*d, m, g.out_width, g.out_height), member.name);
        if (last_component(b.member_suffix) != "png")
          b.member_suffix = stem_or_self(b.member_suffix) + ".png";
        b.crc32 = crc_of(b.bytes);
        out.dense.push_back(std::move(b));
        continue;
      }
    }
    if (dense_mats_[i].empty()) dense_mats_[i] = decode_dense(member.data, o.limits.max_pixels);
    const cv::Mat& d = dense_mats_[i];
    if (g.identity && d.cols == src_w_ && d.rows == src_h_) {
      b.bytes = member.data;
    } else {
      Affine m = g.m;
      if (d.cols != src_w_ || d.rows != src_h_)
        m = compose(g.m, dense_to_image(d.cols, d.rows, src_w_, src_h_));
      b.bytes = encode_dense(warp_dense(d, m, g.out_width, g.out_height), member.name);
      if (last_component(b.member_suffix) != "png")
        b.member_suffix = stem_or_self(b.member_suffix) + ".png";
    }
    b.crc32 = crc_of(b.bytes);
    out.dense.push_back(std::move(b));
  }
  ctx.member = nullptr;

  // A null field has nothing to transform (it stays null); an absent one is an error.
  auto is_null = [&](const std::string& name) {
    const SampleField* f = find_field(fields, name);
    return f && f->value.null;
  };
  for (const auto& name : o.transform.points)
    if (!is_null(name)) transform_points(numeric_field(fields, name, "points"), g.m);
  for (const auto& [name, xyxy] : o.transform.boxes)
    if (!is_null(name))
      transform_boxes(numeric_field(fields, name, "boxes"), xyxy, g.m,
                      o.transform.geometry.box_convention);
  const TransformOptions& t = o.transform;
  for (const auto& name : t.points3d)
    if (!is_null(name)) check_points3d(numeric_field(fields, name, "points3d"));
  for (const auto& a : t.axis_angle)
    if (!is_null(a.name)) check_axis_angle(numeric_field(fields, a.name, "axis-angle"), a);
  for (const auto& c : t.cameras)
    if (!is_null(c.name)) transform_camera(numeric_field(fields, c.name, "camera"), g.m, c.edges);
  for (const auto& name : t.polygons) {
    SampleField* f = find_field(fields, name);
    if (!f) throw SampleError("polygons field '" + name + "' is missing", ErrorCode::BadField);
    if (!f->value.null) transform_polygons(*f, g.m);
  }
  // Masks: rasterised in the source image, warped as the dense maps are, stored after them.
  for (const auto& name : t.masks) {
    const std::string text = segmentation_text(fields, name);
    cv::Mat mask;
    try {
      mask = rasterise_segmentation(parse_coco_segmentation(text, o.limits.max_pixels), src_w_,
                                    src_h_);
    } catch (const ParseError& e) {
      throw SampleError("mask field '" + name + "' (--masks): " + e.what(), ErrorCode::BadField);
    }
    Blob b;
    b.member_suffix = name + ".png";
    b.width = g.out_width;
    b.height = g.out_height;
    b.bytes =
        encode_dense(g.identity ? mask : warp_dense(mask, g.m, g.out_width, g.out_height), name);
    b.crc32 = crc_of(b.bytes);
    out.dense.push_back(std::move(b));
  }
  if (!g.identity) {
    // Geometric-looking fields no flag declared stay in source coordinates: say so, once
    // per field (RunRecorder warns).
    auto declared = [&](const std::string& n) {
      auto in = [&](const auto& names) {
        return std::find(names.begin(), names.end(), n) != names.end();
      };
      for (const auto& b : t.boxes)
        if (b.first == n) return true;
      for (const auto& a : t.axis_angle)
        if (a.name == n) return true;
      for (const auto& c : t.cameras)
        if (c.name == n) return true;
      for (const auto& m : t.masks)
        if (n == m || n == m + ".counts" || n == m + ".size") return true;
      return in(t.points) || in(t.points3d) || in(t.polygons);
    };
    for (const SampleField& f : fields) {
      if (f.name.starts_with("__") || declared(f.name)) continue;
      const std::string flag = geometric_flag_for(f.name);
      if (!flag.empty()) out.undeclared_geometry.push_back({f.name, flag});
    }
  }
  // A mask's segmentation, in source coordinates, is replaced by the mask (and is kept,
  // transformed, only when --polygons declares it too).
  for (const auto& m : t.masks) {
    const bool keep = std::find(t.polygons.begin(), t.polygons.end(), m) != t.polygons.end();
    std::erase_if(fields, [&](const SampleField& f) {
      return (f.name == m && !keep) || f.name == m + ".counts" || f.name == m + ".size";
    });
  }
  if (o.transform.geometry.resize == ResizeMode::Bucket) add_micro_conditioning(fields, g);
}

FieldValue int64_value(int64_t v) {
  FieldValue r;
  r.dtype = DType::I64;
  r.data.resize(sizeof v);
  std::memcpy(r.data.data(), &v, sizeof v);  // little-endian, as every tarmac target
  return r;
}

// Entry k of a value along its first axis: numeric slices keep their dtype; the entries of a
// JSON array are parsed as JSON labels would be (an object flattens to `name.sub` fields).
void slice_into(const SampleField& f, int64_t k, std::vector<SampleField>& out) {
  const FieldValue& v = f.value;
  if (v.kind == FieldValue::Kind::Numeric) {
    SampleField s{f.name, f.member, f.source, {}};
    s.value.dtype = v.dtype;
    s.value.shape.assign(v.shape.begin() + 1, v.shape.end());
    const size_t row = static_cast<size_t>(s.value.num_elements()) * dtype_size(v.dtype);
    const auto* p = v.data.data() + static_cast<size_t>(k) * row;
    s.value.data.assign(p, p + row);
    out.push_back(std::move(s));
    return;
  }
  const auto arr = nlohmann::json::parse(v.data.begin(), v.data.end());
  const std::string text = arr.at(static_cast<size_t>(k)).dump();
  const auto* b = reinterpret_cast<const uint8_t*>(text.data());
  for (auto& [name, value] :
       parse_json_labels(std::span<const uint8_t>(b, text.size()), f.name + ".", f.name))
    out.push_back({std::move(name), f.member, f.source, std::move(value)});
}

// The number of entries along the first axis of an --instances field (null: none).
int64_t instance_count(const SampleField& f, const std::string& role) {
  const FieldValue& v = f.value;
  if (v.null) return 0;
  if (v.kind == FieldValue::Kind::Numeric && !v.shape.empty()) return v.shape.front();
  if (v.kind == FieldValue::Kind::Json) {
    const auto j = nlohmann::json::parse(v.data.begin(), v.data.end(), nullptr, false);
    if (j.is_array()) return static_cast<int64_t>(j.size());
  }
  throw SampleError(role + " field '" + f.name + "' (member '" + f.member + "') has shape " +
                        shape_text(v.shape) +
                        ": it needs a first axis, one entry per instance (an array)",
                    ErrorCode::BadField);
}

// --instances: the label sets of a sample's instances, each with `__row__` = its index.
std::vector<std::vector<SampleField>> split_instances(const std::vector<SampleField>& fields,
                                                      const ConvertOptions& o) {
  const auto named = [&](const std::string& n) {
    return n == o.labels.instances ||
           std::find(o.labels.instance_fields.begin(), o.labels.instance_fields.end(), n) !=
               o.labels.instance_fields.end();
  };
  const SampleField* main = nullptr;
  for (const auto& f : fields)
    if (f.name == o.labels.instances) main = &f;
  if (!main)
    throw SampleError("instances field '" + o.labels.instances + "' is missing (--instances " +
                          o.labels.instances + ")",
                      ErrorCode::BadField);
  const int64_t k_count = instance_count(*main, "instances");
  check_output_count(static_cast<uint64_t>(k_count),
                     "instances field '" + o.labels.instances + "' (--instances) has", "entries",
                     o);
  for (const auto& name : o.labels.instance_fields) {
    const SampleField* f = nullptr;
    for (const auto& g : fields)
      if (g.name == name) f = &g;
    if (!f || f->value.null) continue;  // nothing to slice: every instance lacks it
    const int64_t n = instance_count(*f, "instance");
    if (n != k_count)
      throw SampleError("instance field '" + name + "' (member '" + f->member + "') has " +
                            std::to_string(n) + " entries but instances field '" +
                            o.labels.instances + "' has " + std::to_string(k_count) +
                            " (--instance-fields)",
                        ErrorCode::BadField);
  }
  std::vector<std::vector<SampleField>> sets(static_cast<size_t>(k_count));
  for (int64_t k = 0; k < k_count; ++k) {
    auto& set = sets[static_cast<size_t>(k)];
    for (const auto& f : fields) {
      if (named(f.name) && !f.value.null)
        slice_into(f, k, set);
      else if (!named(f.name))
        set.push_back(f);
    }
    set.push_back({format::kRowField, main->member, main->source, int64_value(k)});
  }
  return sets;
}

// Several outputs from one source: the first is `first`, the others go to first.more.
void gather(std::vector<ProcessedSample>&& outs, ProcessedSample& first) {
  first = std::move(outs.front());
  for (size_t i = 1; i < outs.size(); ++i) first.more.push_back(std::move(outs[i]));
}

// Renders each label set of a sample from one ImageSource (made lazily, once).
void render_all(const RawSample& raw, const Member* image, const std::vector<const Member*>& dense,
                const std::vector<std::string>& dense_suffixes,
                std::vector<std::vector<SampleField>>&& sets, const std::vector<std::string>& keys,
                const ConvertOptions& o, const std::vector<IgnoredMember>& ignored,
                ProcessedSample& result) {
  std::vector<ProcessedSample> outs(sets.size());
  for (size_t i = 0; i < sets.size(); ++i) {
    outs[i].key = keys[i];
    outs[i].input = raw.input;
  }
  Context ctx;
  std::optional<ImageSource> src;
  ProcessedSample source_error;
  if (image)
    guarded(source_error, ctx,
            [&] { src.emplace(*image, dense, dense_suffixes, o, sets.size() == 1, ctx); });
  for (size_t i = 0; i < sets.size(); ++i) {
    ProcessedSample& out = outs[i];
    if (!source_error.error.empty()) {
      out.error = source_error.error;
      out.error_code = source_error.error_code;
      continue;
    }
    Context row_ctx;
    guarded(out, row_ctx, [&] {
      if (src) src->render(sets[i], out, row_ctx);
    });
    out.fields = std::move(sets[i]);
    if (out.error.empty()) select_fields(out.fields, o);
  }
  outs.front().ignored = ignored;
  gather(std::move(outs), result);
}

// Whether the member is read as a label: the order process_sample() sorts members in.
bool is_label_member(const Member& m, const ConvertOptions& o) {
  std::string key, ext;
  split_member_name(m.name, key, ext, o.members.key_rule);
  if (std::find(o.members.dense.begin(), o.members.dense.end(), ext) != o.members.dense.end())
    return false;
  if (!o.members.no_images && is_image_extension(ext, o.members.image_exts)) return false;
  return is_label_ext(last_component(ext));
}

// Refuses a label member over --max-label-size before it is inflated or parsed: a JSON
// document costs ~25-40x its text while parsed, so a small zip can hold gigabytes of it.
void check_label_sizes(const RawSample& raw, const ConvertOptions& o) {
  for (const Member& m : raw.members) {
    const uint64_t size = is_packed(m) ? m.size : m.data.size();
    if (size <= o.limits.max_label_size || !is_label_member(m, o)) continue;
    throw SampleError("member '" + m.name + "': the label member is " + format_bytes(size) +
                          ", over --max-label-size " + format_bytes(o.limits.max_label_size) +
                          " (a label is parsed whole in memory); raise --max-label-size to "
                          "read it",
                      ErrorCode::MemberTooLarge);
  }
}

// The sample's members with their bytes as meant: zip members inflated into `inflated` (which
// must outlive the pointers), the others as they are.
std::vector<const Member*> unpacked_members(const RawSample& raw, std::vector<Member>& inflated,
                                            Context& ctx) {
  std::vector<const Member*> members;
  members.reserve(raw.members.size());
  inflated.resize(raw.members.size());
  for (const auto& m : raw.members) {
    if (!is_packed(m)) {
      members.push_back(&m);
      continue;
    }
    ctx.member = &m.name;
    members.push_back(&unpack_member(m, inflated[members.size()]));
  }
  ctx.member = nullptr;
  return members;
}

}  // namespace

ProcessedSample process_sample(const RawSample& raw, const ConvertOptions& o) {
  ProcessedSample out;
  out.key = raw.key;
  out.input = raw.input;
  Context ctx;
  const Member* image = nullptr;
  std::vector<const Member*> dense(o.members.dense.size(), nullptr);
  bool done = false;  // the outputs are made (several: instances)
  // Zip members are inflated and checked here, on a worker, not by the reader thread; the
  // inflated bytes live as long as the outputs are being made.
  std::vector<Member> inflated;
  std::vector<const Member*> members;
  guarded(out, ctx, [&] {
    if (!raw.errors.empty()) throw SampleError(raw.errors.front(), raw.error_code);
    size_t image_rank = o.members.image_exts.size();
    std::vector<std::pair<const Member*, std::string>> labels;
    std::vector<std::pair<const Member*, std::string>> by_last_ext;  // "rgb.png" for "png"
    check_label_sizes(raw, o);
    members = unpacked_members(raw, inflated, ctx);
    for (const Member* member : members) {
      const Member& m = *member;
      std::string key, ext;
      split_member_name(m.name, key, ext, o.members.key_rule);
      auto d = std::find(o.members.dense.begin(), o.members.dense.end(), ext);
      if (d != o.members.dense.end()) {
        dense[static_cast<size_t>(d - o.members.dense.begin())] = &m;
        continue;
      }
      auto im = std::find(o.members.image_exts.begin(), o.members.image_exts.end(), ext);
      if (im != o.members.image_exts.end() && !o.members.no_images) {
        const size_t rank = static_cast<size_t>(im - o.members.image_exts.begin());
        if (rank < image_rank) {
          if (image)
            out.ignored.push_back(
                {image->name, ErrorCode::SecondImage,
                 "a second image member of the sample; '" + m.name + "' is used"});
          image = &m;
          image_rank = rank;
        } else {
          out.ignored.push_back(
              {m.name, ErrorCode::SecondImage,
               "a second image member of the sample; '" + image->name + "' is used"});
        }
        continue;
      }
      if (!o.members.no_images && is_image_extension(ext, o.members.image_exts)) {
        by_last_ext.emplace_back(&m, ext);
        continue;
      }
      if (is_label_ext(last_component(ext))) {
        labels.emplace_back(&m, ext);
        continue;
      }
      out.ignored.push_back(
          {m.name, ErrorCode::UnusedMember,
           "extension '." + ext + "' is neither an image, a dense map nor a label"});
    }
    if (image) {
      for (const auto& [m, ext] : by_last_ext)
        out.ignored.push_back({m->name, ErrorCode::SecondImage,
                               "an image member that is not the sample's image ('" + image->name +
                                   "' is); pass --dense " + ext + " to keep it as a dense map"});
    } else if (by_last_ext.size() == 1) {
      image = by_last_ext.front().first;
    }

    for (const auto& [m, ext] : labels) {
      ctx.member = &m->name;
      ctx.parse_code = label_error_code(ext);
      parse_label_member(*m, ext, o.limits.max_label_size, out.fields);
    }
    ctx.member = nullptr;
    check_required(out.fields, o);
    if (!o.members.no_images) {
      if (!image && by_last_ext.size() > 1)
        throw several_images(by_last_ext, raw.key, o.members.key_rule);
      if (!image) throw no_image(raw, o.members.image_exts);
      if (o.labels.classes_from_dirs) add_class(*image, o.labels.classes, out.fields);
      for (size_t i = 0; i < dense.size(); ++i)
        if (!dense[i])
          throw SampleError("sample has no dense map member '." + o.members.dense[i] + "'",
                            ErrorCode::NoDenseMap);
    }
    if (o.labels.instances.empty()) return;
    auto sets = split_instances(out.fields, o);
    if (sets.empty())
      throw SampleError("instances field '" + o.labels.instances + "' has no entries (--instances)",
                        ErrorCode::NoInstances);
    std::vector<std::string> keys;
    for (size_t k = 0; k < sets.size(); ++k) keys.push_back(raw.key + "/" + std::to_string(k));
    render_all(raw, o.members.no_images ? nullptr : image, dense, o.members.dense, std::move(sets),
               keys, o, out.ignored, out);
    done = true;
  });
  if (done || !out.error.empty()) return out;
  if (o.members.no_images) {
    select_fields(out.fields, o);
    return out;
  }
  std::vector<std::vector<SampleField>> one;
  one.push_back(std::move(out.fields));
  render_all(raw, image, dense, o.members.dense, std::move(one), {raw.key}, o, out.ignored, out);
  return out;
}

ProcessedSample process_table_group(const RawSample& raw, const TablePlan& plan,
                                    const ConvertOptions& o) {
  const TableGroup& g = plan.groups()[static_cast<size_t>(raw.table_group)];
  ProcessedSample out;
  out.key = g.key;
  out.input = raw.input;
  std::vector<std::vector<SampleField>> sets;
  std::vector<std::string> keys;
  std::vector<ProcessedSample> bad;  // rows whose labels are refused before any decoding
  Context ctx;
  ProcessedSample too_many;
  guarded(too_many, ctx, [&] {
    check_output_count(g.rows.size(), "image '" + g.paths.front() + "' is named by", "table rows",
                       o);
  });
  if (!too_many.error.empty()) {
    // Every row is bad; under --on-error fail the first stops the run, so one is enough.
    for (uint64_t row : g.rows) {
      ProcessedSample r;
      r.key = plan.row_key(g, row);
      r.input = raw.input;
      r.error = too_many.error;
      r.error_code = too_many.error_code;
      bad.push_back(std::move(r));
      if (!o.run.skip_errors) break;
    }
    gather(std::move(bad), out);
    return out;
  }
  for (uint64_t row : g.rows) {
    ProcessedSample r;
    r.key = plan.row_key(g, row);
    r.input = raw.input;
    std::vector<SampleField> fields = plan.row_fields(row);
    guarded(r, ctx, [&] {
      check_required(fields, o);
      if (o.labels.classes_from_dirs) add_class(raw.members.front(), o.labels.classes, fields);
    });
    if (!r.error.empty()) {
      bad.push_back(std::move(r));
      continue;
    }
    sets.push_back(std::move(fields));
    keys.push_back(r.key);
  }
  std::vector<Member> inflated;
  std::vector<const Member*> members;
  ProcessedSample unpack_error;
  guarded(unpack_error, ctx, [&] { members = unpacked_members(raw, inflated, ctx); });
  if (!raw.errors.empty() || !unpack_error.error.empty() || raw.members.size() != g.paths.size() ||
      sets.empty()) {
    // The members did not all come (or the rows are all refused): each row says why.
    for (size_t i = 0; i < keys.size(); ++i) {
      ProcessedSample r;
      r.key = keys[i];
      r.input = raw.input;
      if (!raw.errors.empty()) {
        r.error = raw.errors.front();
        r.error_code = raw.error_code;
      } else if (!unpack_error.error.empty()) {
        r.error = unpack_error.error;
        r.error_code = unpack_error.error_code;
      } else {
        r.error = "the sample's members are incomplete";
        r.error_code = ErrorCode::MissingMember;
      }
      bad.push_back(std::move(r));
    }
    gather(std::move(bad), out);
    return out;
  }
  std::vector<const Member*> dense;
  std::vector<std::string> suffixes;
  for (size_t i = 1; i < members.size(); ++i) {
    // The map keeps its column's name and its member's last extension: "depth.png".
    const std::string& name = members[i]->name;
    const std::string file = name.substr(name.rfind('/') + 1);
    const size_t dot = file.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : file.substr(dot + 1);
    if (ext == "npy") {
      for (auto& k : keys) {
        ProcessedSample r;
        r.key = k;
        r.input = raw.input;
        r.error = "member '" + name +
                  "': a .npy dense map named by a table column is not supported; with --table, "
                  "dense maps must be images (PNG, TIFF, ...)";
        r.error_code = ErrorCode::BadDenseMap;
        bad.push_back(std::move(r));
      }
      gather(std::move(bad), out);
      return out;
    }
    dense.push_back(members[i]);
    suffixes.push_back(o.members.dense[i - 1] + "." + (ext.empty() ? "png" : ext));
  }
  render_all(raw, members.front(), dense, suffixes, std::move(sets), keys, o, {}, out);
  for (auto& b : bad) out.more.push_back(std::move(b));
  return out;
}

}  // namespace tarmac
