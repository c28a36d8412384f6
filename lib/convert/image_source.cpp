#include "convert/image_source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "common/crc32.h"
#include "common/error.h"
#include "convert/label_geometry.h"
#include "convert/npy_dense.h"
#include "convert/sample_labels.h"
#include "format/names.h"
#include "transform/coco_mask.h"
#include "transform/jpeg_region.h"
#include "transform/png_region.h"
#include "transform/warp.h"

namespace tarmac {
namespace {

std::vector<uint8_t> encode_dense(const cv::Mat& m, const std::string& member) {
  const int depth = m.depth();
  if (depth != CV_8U && depth != CV_16U)
    throw SampleError("dense map '" + member +
                          "' has a pixel type tarmac cannot store losslessly as PNG (only 8- and "
                          "16-bit maps are supported)",
                      ErrorCode::BadDenseMap);
  return encode_image(m, OutputFormat::Png, 0);
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

// A dense map re-encoded: stored as PNG, under its suffix with a ".png" last extension.
void store_warped_dense(Blob& b, const cv::Mat& warped, const std::string& member) {
  b.bytes = encode_dense(warped, member);
  if (last_extension(b.member_suffix) != "png")
    b.member_suffix = extension_stem(b.member_suffix) + ".png";
}

// Whether a field is declared by one of the geometric kinds' flags (a mask's parts too).
bool declared_geometry(const TransformOptions& t, const std::string& n) {
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
}

}  // namespace

std::string geometric_flag_for(const std::string& name) {
  std::string n = last_extension(name);
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

void transform_label_geometry(std::vector<SampleField>& fields, const Geometry& g,
                              const TransformOptions& t, ProcessedSample& out) {
  // A null field has nothing to transform (it stays null); an absent one is an error.
  auto is_null = [&](const std::string& name) {
    const SampleField* f = find_field(fields, name);
    return f && f->value.null;
  };
  for (const auto& name : t.points)
    if (!is_null(name)) transform_points(numeric_field(fields, name, "points"), g.m);
  for (const auto& [name, xyxy] : t.boxes)
    if (!is_null(name))
      transform_boxes(numeric_field(fields, name, "boxes"), xyxy, g.m, t.geometry.box_convention);
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
  if (g.identity) return;
  // Geometric-looking fields no flag declared stay in source coordinates: say so, once per
  // field (RunRecorder warns).
  for (const SampleField& f : fields) {
    if (f.name.starts_with("__") || declared_geometry(t, f.name)) continue;
    const std::string flag = geometric_flag_for(f.name);
    if (!flag.empty()) out.undeclared_geometry.push_back({f.name, flag});
  }
}

ImageSource::ImageSource(const Member& image, std::vector<const Member*> dense,
                         std::vector<std::string> dense_suffixes, const SampleRecipe& recipe,
                         bool single, SampleContext& ctx)
    : image_(image),
      dense_(std::move(dense)),
      suffixes_(std::move(dense_suffixes)),
      recipe_(recipe),
      single_(single),
      dense_mats_(dense_.size()) {
  const TransformOptions& t = recipe.transform;
  const uint64_t max_pixels = recipe.limits.max_pixels;
  check_channels_format(t);
  ctx.member = &image.name;
  ctx.parse_code = ErrorCode::BadImage;
  hdr_ = probe_image(image.data);
  check_image_pixels(hdr_, max_pixels);
  const bool plain_jpeg = hdr_.format == ImageFormat::Jpeg && !hdr_.cmyk && hdr_.width > 0;
  const bool region_png = hdr_.format == ImageFormat::Png && png_region_decodable(image.data);
  // --dedup hashes the whole decoded source: a JPEG's region decode then decodes it whole at
  // its own scale (render()); other images are decoded whole here.
  const bool hash = recipe.hashes();
  region_path_ = single && ((plain_jpeg && hdr_.orientation == 1) || (region_png && !hash)) &&
                 t.format != OutputFormat::Keep;
  src_w_ = hdr_.display_width();
  src_h_ = hdr_.display_height();
  if (t.format == OutputFormat::Keep && plain_jpeg && !hash) {
    validate_jpeg(image.data);
  } else if (!region_path_) {
    src_ = decode_image(image.data, max_pixels);
    src_w_ = src_.cols;
    src_h_ = src_.rows;
  }
  if (hash && !region_path_) content_ = hash_of(src_);
  ctx.member = nullptr;
}

ContentHash ImageSource::hash_of(const cv::Mat& pixels) const {
  if (recipe_.dedup == DedupOptions::Mode::Near) return {{}, perceptual_hash(pixels)};
  return content_hash(pixels);
}

void ImageSource::add_micro_conditioning(std::vector<SampleField>& fields,
                                         const Geometry& g) const {
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

Geometry ImageSource::geometry_of(std::vector<SampleField>& fields, SampleContext& ctx) const {
  const TransformOptions& t = recipe_.transform;
  std::optional<Region> field_box;
  if (t.geometry.crop == CropMode::Field) {
    ctx.member = nullptr;  // the field's own member is named in the message
    SampleField& f = numeric_field(fields, t.crop_field, "crop box");
    if (f.value.num_elements() < 4 || f.value.shape.size() > 1)
      throw SampleError("crop box field '" + t.crop_field + "' (member '" + f.member +
                            "') has shape " + shape_text(f.value.shape) +
                            "; it needs 4 numbers (x, y, w, h or x0, y0, x1, y1; more are "
                            "allowed after them, such as a confidence)",
                        ErrorCode::BadField);
    const std::vector<double> b = as_doubles(f.value);
    field_box = region_from_box(b.data(), t.crop_field_xyxy);
  }
  ctx.member = &image_.name;
  ctx.parse_code = ErrorCode::BadImage;
  const Geometry g = compute_geometry(t.geometry, src_w_, src_h_, field_box);
  // Before the output is allocated: the sizes --resize shorter/none and box crops leave to the
  // source (the flags' own bound was checked before the run, check_output_bound).
  check_output_size(g.out_width, g.out_height, t, recipe_.limits.max_pixels);
  return g;
}

cv::Mat ImageSource::warped_jpeg_region(const Geometry& g) {
  const TransformOptions& t = recipe_.transform;
  thread_local std::vector<uint8_t> scratch;  // one warm buffer per worker, not a fresh one
  const ResampleMode mode = t.geometry.resample;
  // --dedup: the region decode decodes the whole image at its scale, and the hashes are taken
  // of that (the output's pixels are the same as without --dedup). The exact digest is of the
  // full-scale pixels, and the pHash of the full or half scale (format.md 1.5: at 1/4 or 1/8 it
  // moves up to 8 bits): other scales cost a whole decode of their own.
  const bool hash = recipe_.hashes(), near = recipe_.dedup == DedupOptions::Mode::Near;
  const int denom = region_dct_denom(g, mode);
  const bool shared = hash && (denom == 1 || (near && denom == 2));
  if (hash && !shared)
    content_ = hash_of(near ? decode_jpeg_scaled(image_.data, src_w_, src_h_, 2,
                                                 cv::Rect(0, 0, src_w_, src_h_), JpegPixels::Bgr)
                                  .pixels
                            : decode_image(image_.data, recipe_.limits.max_pixels));
  cv::Mat whole;
  const RegionDecode rd =
      decode_jpeg_region(image_.data, src_w_, src_h_, g, mode, &scratch, shared ? &whole : nullptr);
  if (shared) content_ = hash_of(whole);
  if (rd.pixels.empty())
    return cv::Mat(g.out_height, g.out_width, CV_8UC3, cv::Scalar::all(t.pad_value));
  if (rd.filter == ShrinkFilter::Cubic)
    return area_resample(rd.pixels, rd.m, g.out_width, g.out_height, t.pad_value, rd.filter);
  return warp_image(rd.pixels, rd.m, g.out_width, g.out_height, t.pad_value);
}

cv::Mat ImageSource::warped_pixels(const Geometry& g) {
  const TransformOptions& t = recipe_.transform;
  if (region_path_ && hdr_.format == ImageFormat::Png) {
    // The whole image's size, its region's pixels only: the warp is the full decode's.
    const cv::Rect need = g.identity
                              ? cv::Rect(0, 0, src_w_, src_h_)
                              : warp_source_rect(g.m, g.out_width, g.out_height, src_w_, src_h_);
    const uint64_t max_pixels = recipe_.limits.max_pixels;
    std::optional<cv::Mat> png = decode_png_region(image_.data, PngLayout::Bgr8, need, max_pixels);
    const cv::Mat src = png ? *png : decode_image(image_.data, max_pixels);
    return g.identity ? src : warp_image(src, g.m, g.out_width, g.out_height, t.pad_value);
  }
  if (region_path_) return warped_jpeg_region(g);
  return g.identity ? src_ : warp_image(src_, g.m, g.out_width, g.out_height, t.pad_value);
}

void ImageSource::render_image(const Geometry& g, ProcessedSample& out) {
  const TransformOptions& t = recipe_.transform;
  if (t.format == OutputFormat::Keep) {
    if (!g.identity)
      throw FatalError(
          "--format keep stores the source bytes untouched, so it cannot be "
          "combined with a crop or resize");
    out.image.bytes = image_.data;
    std::string k, ext;
    split_member_name(image_.name, k, ext, recipe_.members.key_rule);
    out.image.member_suffix = ext;
  } else {
    cv::Mat warped = warped_pixels(g);
    // Grey sources are decoded as 3 equal channels; OpenCV's BGR->grey weights (their
    // fixed-point values sum to exactly 1) give each grey value back unchanged.
    if (t.channels == ChannelMode::One || (t.channels == ChannelMode::Keep && hdr_.grey)) {
      cv::Mat grey;
      cv::cvtColor(warped, grey, cv::COLOR_BGR2GRAY);
      warped = grey;
    }
    out.image.bytes =
        encode_image(warped.isContinuous() ? warped : warped.clone(), t.format, t.quality);
    out.image.member_suffix = format_extension(t.format);
  }
  out.image.width = g.out_width;
  out.image.height = g.out_height;
  out.image.crc32 = crc32_of(out.image.bytes);
  out.content = content_;
}

void ImageSource::render_dense(const Geometry& g, ProcessedSample& out, SampleContext& ctx) {
  const uint64_t max_pixels = recipe_.limits.max_pixels;
  for (size_t i = 0; i < dense_.size(); ++i) {
    const Member& member = *dense_[i];
    ctx.member = &member.name;
    ctx.parse_code = ErrorCode::BadDenseMap;
    Blob b;
    b.member_suffix = suffixes_[i];
    b.width = g.out_width;
    b.height = g.out_height;
    if (format::is_npy_dense(suffixes_[i])) {
      b.bytes = npy_dense_map(member.data, src_w_, src_h_, g, max_pixels);
      b.crc32 = crc32_of(b.bytes);
      out.dense.push_back(std::move(b));
      continue;
    }
    if (single_ && !g.identity && png_region_decodable(member.data)) {
      // One output: only the rows and columns the warp reads (png_region.h).
      const ImageHeader dh = probe_image(member.data);
      check_image_pixels(dh, max_pixels);
      Affine m = g.m;
      if (dh.width != src_w_ || dh.height != src_h_)
        m = compose(g.m, dense_to_image(dh.width, dh.height, src_w_, src_h_));
      const cv::Rect need = warp_source_rect(m, g.out_width, g.out_height, dh.width, dh.height);
      if (std::optional<cv::Mat> d =
              decode_png_region(member.data, PngLayout::Unchanged, need, max_pixels)) {
        store_warped_dense(b, warp_dense(*d, m, g.out_width, g.out_height), member.name);
        b.crc32 = crc32_of(b.bytes);
        out.dense.push_back(std::move(b));
        continue;
      }
    }
    if (dense_mats_[i].empty()) dense_mats_[i] = decode_dense(member.data, max_pixels);
    const cv::Mat& d = dense_mats_[i];
    if (g.identity && d.cols == src_w_ && d.rows == src_h_) {
      b.bytes = member.data;
    } else {
      Affine m = g.m;
      if (d.cols != src_w_ || d.rows != src_h_)
        m = compose(g.m, dense_to_image(d.cols, d.rows, src_w_, src_h_));
      store_warped_dense(b, warp_dense(d, m, g.out_width, g.out_height), member.name);
    }
    b.crc32 = crc32_of(b.bytes);
    out.dense.push_back(std::move(b));
  }
  ctx.member = nullptr;
}

void ImageSource::render_masks(std::vector<SampleField>& fields, const Geometry& g,
                               ProcessedSample& out) const {
  const TransformOptions& t = recipe_.transform;
  for (const auto& name : t.masks) {
    const std::string text = segmentation_text(fields, name);
    cv::Mat mask;
    try {
      mask = rasterise_segmentation(parse_coco_segmentation(text, recipe_.limits.max_pixels),
                                    src_w_, src_h_);
    } catch (const ParseError& e) {
      throw SampleError("mask field '" + name + "' (--masks): " + e.what(), ErrorCode::BadField);
    }
    Blob b;
    b.member_suffix = name + ".png";
    b.width = g.out_width;
    b.height = g.out_height;
    b.bytes =
        encode_dense(g.identity ? mask : warp_dense(mask, g.m, g.out_width, g.out_height), name);
    b.crc32 = crc32_of(b.bytes);
    out.dense.push_back(std::move(b));
  }
}

void ImageSource::render(std::vector<SampleField>& fields, ProcessedSample& out,
                         SampleContext& ctx) {
  const Geometry g = geometry_of(fields, ctx);
  out.affine = g.m;
  // A .npy label of the image's height and width is most likely a dense map (depth, a mask)
  // that --dense would have warped with the image; as a label it stays as it was.
  if (!g.identity)
    for (const SampleField& f : fields)
      if ((f.source == "npy" || f.source.ends_with(".npy")) && f.value.shape.size() >= 2 &&
          f.value.shape[0] == src_h_ && f.value.shape[1] == src_w_)
        out.image_sized_labels.push_back({f.name, f.source});
  render_image(g, out);
  render_dense(g, out, ctx);
  // Masks are rasterised from their segmentation in source coordinates: before --polygons
  // moves the same field's vertices (a field both flags name).
  render_masks(fields, g, out);
  const TransformOptions& t = recipe_.transform;
  transform_label_geometry(fields, g, t, out);
  // A mask's segmentation, in source coordinates, is replaced by the mask (and is kept,
  // transformed, only when --polygons declares it too).
  for (const auto& m : t.masks) {
    const bool keep = std::find(t.polygons.begin(), t.polygons.end(), m) != t.polygons.end();
    std::erase_if(fields, [&](const SampleField& f) {
      return (f.name == m && !keep) || f.name == m + ".counts" || f.name == m + ".size";
    });
  }
  if (t.geometry.resize == ResizeMode::Bucket) add_micro_conditioning(fields, g);
}

}  // namespace tarmac
