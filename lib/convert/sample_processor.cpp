#include "convert/sample_processor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "common/crc32.h"
#include "common/error.h"
#include "convert/npy_dense.h"
#include "format/names.h"
#include "labels/json_labels.h"
#include "labels/npy.h"
#include "labels/npz.h"
#include "labels/text_labels.h"
#include "source/class_scan.h"
#include "source/packed_member.h"
#include "transform/jpeg_region.h"
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

void parse_label_member(const Member& m, const std::string& ext, uint64_t max_member_size,
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
    for (auto& [name, v] : parse_npz(bytes, prefix_of(ext), max_member_size))
      add(name, std::move(v));
  } else if (last == "npy") {
    add(stem_or_self(ext), parse_npy(bytes));
  } else if (last == "txt") {
    add(stem_or_self(ext), parse_txt(bytes));
  } else if (last == "cls") {
    add(stem_or_self(ext), parse_cls(bytes));
  }
}

// --fields / --drop-fields, once the geometry has used what it needs.
void select_fields(std::vector<SampleField>& fields, const ConvertOptions& o) {
  if (o.keep_fields.empty() && o.drop_fields.empty()) return;
  auto listed = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  std::erase_if(fields, [&](const SampleField& f) {
    return (!o.keep_fields.empty() && !listed(o.keep_fields, f.name)) ||
           listed(o.drop_fields, f.name);
  });
}

SampleField* find_field(std::vector<SampleField>& fields, const std::string& name) {
  for (auto& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<double> as_doubles(const FieldValue& v) {
  std::vector<uint8_t> out;
  convert_elements(v.dtype, v.data.data(), static_cast<uint64_t>(v.num_elements()), DType::F64,
                   out);
  std::vector<double> d(out.size() / 8);
  std::memcpy(d.data(), out.data(), out.size());
  return d;
}

void store_doubles(FieldValue& v, const std::vector<double>& d) {
  const DType to = v.dtype == DType::F32 ? DType::F32 : DType::F64;
  std::vector<uint8_t> out;
  convert_elements(DType::F64, reinterpret_cast<const uint8_t*>(d.data()), d.size(), to, out);
  v.dtype = to;
  v.data = std::move(out);
}

SampleField& numeric_field(std::vector<SampleField>& fields, const std::string& name,
                           const char* role) {
  SampleField* f = find_field(fields, name);
  if (!f)
    throw SampleError(std::string(role) + " field '" + name + "' is missing", ErrorCode::BadField);
  if (f->value.null)
    throw SampleError(
        std::string(role) + " field '" + name + "' (member '" + f->member + "') is null",
        ErrorCode::BadField);
  if (f->value.kind != FieldValue::Kind::Numeric)
    throw SampleError(
        std::string(role) + " field '" + name + "' (member '" + f->member + "') is not numeric",
        ErrorCode::BadField);
  return *f;
}

void transform_points(SampleField& f, const Affine& m) {
  const auto& shape = f.value.shape;
  if (shape.empty() || shape.back() < 2)
    throw SampleError("points field '" + f.name + "' (member '" + f.member + "') has shape " +
                          shape_text(shape) + "; its last axis must hold x, y (at least 2 values)",
                      ErrorCode::BadField);
  std::vector<double> d = as_doubles(f.value);
  const size_t stride = static_cast<size_t>(shape.back());
  for (size_t i = 0; i + stride <= d.size(); i += stride)
    apply_affine(m, d[i], d[i + 1], d[i], d[i + 1]);
  store_doubles(f.value, d);
}

void transform_boxes(SampleField& f, bool xyxy, const Affine& m) {
  const auto& shape = f.value.shape;
  if (shape.empty() || shape.back() != 4)
    throw SampleError("boxes field '" + f.name + "' (member '" + f.member + "') has shape " +
                          shape_text(shape) + "; its last axis must hold 4 values",
                      ErrorCode::BadField);
  std::vector<double> d = as_doubles(f.value);
  for (size_t i = 0; i + 4 <= d.size(); i += 4) {
    double x0 = d[i], y0 = d[i + 1], x1 = xyxy ? d[i + 2] : d[i] + d[i + 2],
           y1 = xyxy ? d[i + 3] : d[i + 1] + d[i + 3];
    apply_affine(m, x0, y0, x0, y0);
    apply_affine(m, x1, y1, x1, y1);
    d[i] = x0;
    d[i + 1] = y0;
    d[i + 2] = xyxy ? x1 : x1 - x0;
    d[i + 3] = xyxy ? y1 : y1 - y0;
  }
  store_doubles(f.value, d);
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

}  // namespace

ProcessedSample process_sample(const RawSample& raw, const ConvertOptions& o) {
  ProcessedSample out;
  out.key = raw.key;
  out.input = raw.input;
  const std::string* current_member = nullptr;
  // What a ParseError (or OpenCV's failure) from the current member means for the sample.
  ErrorCode parse_code = ErrorCode::BadSample;
  try {
    if (!raw.errors.empty()) throw SampleError(raw.errors.front(), raw.error_code);
    const Member* image = nullptr;
    size_t image_rank = o.image_exts.size();
    std::vector<const Member*> dense(o.dense.size(), nullptr);
    std::vector<std::pair<const Member*, std::string>> labels;
    std::vector<std::pair<const Member*, std::string>> by_last_ext;  // "rgb.png" for "png"
    // Zip members are inflated and checked here, on a worker, not by the reader thread.
    std::vector<Member> inflated;
    std::vector<const Member*> members;
    members.reserve(raw.members.size());
    for (const auto& m : raw.members) {
      if (!is_packed(m)) {
        members.push_back(&m);
        continue;
      }
      if (inflated.empty()) inflated.resize(raw.members.size());
      current_member = &m.name;
      members.push_back(&unpack_member(m, inflated[members.size()]));
    }
    current_member = nullptr;
    for (const Member* member : members) {
      const Member& m = *member;
      std::string key, ext;
      split_member_name(m.name, key, ext, o.key_rule);
      auto d = std::find(o.dense.begin(), o.dense.end(), ext);
      if (d != o.dense.end()) {
        dense[static_cast<size_t>(d - o.dense.begin())] = &m;
        continue;
      }
      auto im = std::find(o.image_exts.begin(), o.image_exts.end(), ext);
      if (im != o.image_exts.end() && !o.no_images) {
        const size_t rank = static_cast<size_t>(im - o.image_exts.begin());
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
      if (!o.no_images && is_image_extension(ext, o.image_exts)) {
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
      current_member = &m->name;
      parse_code = label_error_code(ext);
      parse_label_member(*m, ext, o.max_member_size, out.fields);
    }
    current_member = nullptr;
    for (const auto& name : o.require_fields) {
      const SampleField* f = find_field(out.fields, name);
      if (!f || f->value.null)
        throw SampleError("required field '" + name + "' is " + (f ? "null" : "missing") +
                              " (--require " + name + ")",
                          ErrorCode::BadField);
    }
    if (o.no_images) {
      select_fields(out.fields, o);
      return out;
    }

    if (!image && by_last_ext.size() > 1) throw several_images(by_last_ext, raw.key, o.key_rule);
    if (!image) throw no_image(raw, o.image_exts);
    if (o.classes_from_dirs) add_class(*image, o.classes, out.fields);
    for (size_t i = 0; i < dense.size(); ++i)
      if (!dense[i])
        throw SampleError("sample has no dense map member '." + o.dense[i] + "'",
                          ErrorCode::NoDenseMap);

    if (o.channels != ChannelMode::Three &&
        (o.format == OutputFormat::Webp || o.format == OutputFormat::Raw ||
         (o.format == OutputFormat::Keep && o.channels == ChannelMode::One)))
      throw FatalError("--channels " + std::string(o.channels == ChannelMode::One ? "1" : "keep") +
                       " cannot be stored with --format " +
                       (o.format == OutputFormat::Keep ? "keep (the source bytes)"
                                                       : format_extension(o.format)) +
                       ": WebP and raw images are 3-channel; use --format jpg or png");
    current_member = &image->name;
    parse_code = ErrorCode::BadImage;
    // JPEGs in stored orientation are decoded after the geometry is known, and only as far
    // as the crop needs (jpeg_region.h); everything else is decoded whole first.
    const ImageHeader hdr = probe_image(image->data);
    check_image_pixels(hdr, o.max_pixels);
    const bool plain_jpeg = hdr.format == ImageFormat::Jpeg && !hdr.cmyk && hdr.width > 0;
    const bool region_path = plain_jpeg && hdr.orientation == 1 && o.format != OutputFormat::Keep;
    cv::Mat src;
    int src_w = hdr.display_width(), src_h = hdr.display_height();
    if (o.format == OutputFormat::Keep && plain_jpeg) {
      validate_jpeg(image->data);
    } else if (!region_path) {
      src = decode_image(image->data, o.max_pixels);
      src_w = src.cols;
      src_h = src.rows;
    }
    std::optional<Region> field_box;
    if (o.geometry.crop == CropMode::Field) {
      current_member = nullptr;  // the field's own member is named in the message
      SampleField& f = numeric_field(out.fields, o.crop_field, "crop box");
      if (f.value.num_elements() != 4)
        throw SampleError("crop box field '" + o.crop_field + "' (member '" + f.member +
                              "') has shape " + shape_text(f.value.shape) + "; it needs 4 numbers",
                          ErrorCode::BadField);
      const std::vector<double> b = as_doubles(f.value);
      field_box = region_from_box(b.data(), o.crop_field_xyxy);
    }
    current_member = &image->name;
    const Geometry g = compute_geometry(o.geometry, src_w, src_h, field_box);
    out.affine = g.m;

    if (o.format == OutputFormat::Keep) {
      if (!g.identity)
        throw FatalError(
            "--format keep stores the source bytes untouched, so it cannot be "
            "combined with a crop or resize");
      out.image.bytes = image->data;
      std::string k, ext;
      split_member_name(image->name, k, ext, o.key_rule);
      out.image.member_suffix = ext;
    } else {
      cv::Mat warped;
      if (region_path) {
        const RegionDecode rd = decode_jpeg_region(image->data, src_w, src_h, g);
        if (rd.pixels.empty())
          warped = cv::Mat(g.out_height, g.out_width, CV_8UC3, cv::Scalar::all(o.pad_value));
        else
          warped = warp_image(rd.pixels, rd.m, g.out_width, g.out_height, o.pad_value);
      } else {
        warped = g.identity ? src : warp_image(src, g.m, g.out_width, g.out_height, o.pad_value);
      }
      // Grey sources are decoded as 3 equal channels; OpenCV's BGR->grey weights (their
      // fixed-point values sum to exactly 1) give each grey value back unchanged.
      if (o.channels == ChannelMode::One || (o.channels == ChannelMode::Keep && hdr.grey)) {
        cv::Mat grey;
        cv::cvtColor(warped, grey, cv::COLOR_BGR2GRAY);
        warped = grey;
      }
      out.image.bytes =
          encode_image(warped.isContinuous() ? warped : warped.clone(), o.format, o.quality);
      out.image.member_suffix = format_extension(o.format);
    }
    out.image.width = g.out_width;
    out.image.height = g.out_height;
    out.image.crc32 = crc_of(out.image.bytes);

    for (size_t i = 0; i < dense.size(); ++i) {
      current_member = &dense[i]->name;
      parse_code = ErrorCode::BadDenseMap;
      Blob b;
      b.member_suffix = o.dense[i];
      b.width = g.out_width;
      b.height = g.out_height;
      if (format::is_npy_dense(o.dense[i])) {
        b.bytes = npy_dense_map(dense[i]->data, src_w, src_h, g, o.max_pixels);
        b.crc32 = crc_of(b.bytes);
        out.dense.push_back(std::move(b));
        continue;
      }
      cv::Mat d = decode_dense(dense[i]->data, o.max_pixels);
      if (g.identity && d.cols == src_w && d.rows == src_h) {
        b.bytes = dense[i]->data;
      } else {
        Affine m = g.m;
        if (d.cols != src_w || d.rows != src_h)
          m = compose(g.m, dense_to_image(d.cols, d.rows, src_w, src_h));
        b.bytes = encode_dense(warp_dense(d, m, g.out_width, g.out_height), dense[i]->name);
        if (last_component(b.member_suffix) != "png")
          b.member_suffix = stem_or_self(b.member_suffix) + ".png";
      }
      b.crc32 = crc_of(b.bytes);
      out.dense.push_back(std::move(b));
    }
    current_member = nullptr;

    // A null field has nothing to transform (it stays null); an absent one is an error.
    auto is_null = [&](const std::string& name) {
      const SampleField* f = find_field(out.fields, name);
      return f && f->value.null;
    };
    for (const auto& name : o.points)
      if (!is_null(name)) transform_points(numeric_field(out.fields, name, "points"), g.m);
    for (const auto& [name, xyxy] : o.boxes)
      if (!is_null(name)) transform_boxes(numeric_field(out.fields, name, "boxes"), xyxy, g.m);
  } catch (const ParseError& e) {
    out.error = (current_member ? "member '" + *current_member + "': " : "") + e.what();
    out.error_code = parse_code;
  } catch (const SampleError& e) {
    out.error = (current_member ? "member '" + *current_member + "': " : "") + e.what();
    out.error_code = e.code();
  } catch (const cv::Exception& e) {
    out.error =
        (current_member ? "member '" + *current_member + "': " : "") + "OpenCV failed: " + e.what();
    out.error_code = parse_code;
  } catch (const std::bad_alloc&) {
    out.error = (current_member ? "member '" + *current_member + "': " : "") +
                "out of memory while converting this sample";
    out.error_code = ErrorCode::OutOfMemory;
  }
  if (out.error.empty()) select_fields(out.fields, o);
  return out;
}

}  // namespace tarmac
