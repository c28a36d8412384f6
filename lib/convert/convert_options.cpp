#include "convert/convert_options.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/bytes.h"
#include "common/error.h"
#include "format/names.h"
#include "remote/url.h"
#include "source/pipe_stream.h"

namespace tarmac {
namespace {

bool reads_stdin(const ConvertOptions& o) {
  return std::find(o.source.inputs.begin(), o.source.inputs.end(), "-") != o.source.inputs.end();
}

std::string size_text(int64_t w, int64_t h) {
  return std::to_string(w) + "x" + std::to_string(h);
}

const char* format_name(OutputFormat f) {
  switch (f) {
    case OutputFormat::Jpeg:
      return "JPEG";
    case OutputFormat::Png:
      return "PNG";
    case OutputFormat::Webp:
      return "WebP";
    case OutputFormat::Raw:
      return "raw";
    case OutputFormat::Keep:
      break;
  }
  return "keep";
}

// The output sizes the flags alone decide: every output is at most `width` x `height` (Exact,
// Fit, Longer, Bucket: `pixels` the largest area, `side` the longest side), or at least that
// (Shorter: the longer side follows the source). Unknown for ResizeMode::None (the region's
// own size: at most the decoded image's unless a box crop reaches past it), checked per sample.
struct OutputBound {
  bool known = false;
  bool at_least = false;  ///< Shorter: the bound is the smallest output, not the largest
  int64_t width = 0, height = 0, pixels = 0;
  int64_t side_width = 0, side_height = 0;  ///< the output with the longest side
  int64_t side() const { return std::max(side_width, side_height); }
  std::string flags;  ///< the flags that decide it, as the user wrote them
};

OutputBound output_bound(const GeometryOptions& g) {
  OutputBound b;
  const std::string size =
      "--size " + (g.width == g.height ? std::to_string(g.width) : size_text(g.width, g.height));
  b.width = g.width;
  b.height = g.height;
  switch (g.resize) {
    case ResizeMode::None:
      return b;
    case ResizeMode::Exact:
      b.flags = size + (g.crop == CropMode::None     ? " (--resize exact)"
                        : g.crop == CropMode::Center ? " with --crop center"
                                                     : " with --crop");
      break;
    case ResizeMode::Fit:
      b.flags = size + " with --resize fit";
      break;
    case ResizeMode::Longer:
      b.flags = size + " with --resize longer";
      b.height = g.width;
      break;
    case ResizeMode::Shorter:
      b.flags = size + " with --resize shorter";
      b.height = g.width;
      b.at_least = true;
      break;
    case ResizeMode::Bucket: {
      b.width = b.height = 0;
      for (const auto& [w, h] :
           aspect_buckets(int64_t{g.width} * g.height, g.bucket_step, g.bucket_max_ratio)) {
        // The largest area; of equal areas the squarest (the bucket a square source takes).
        const int64_t area = int64_t{w} * h, best = b.width * b.height;
        if (area > best || (area == best && std::max(w, h) < std::max(b.width, b.height)))
          b.width = w, b.height = h;
        if (std::max(w, h) > b.side()) b.side_width = w, b.side_height = h;
      }
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%g", g.bucket_max_ratio);
      b.flags = size + " with --resize bucket (--bucket-step " + std::to_string(g.bucket_step) +
                ", --bucket-max-ratio " + ratio + "; its largest bucket " +
                size_text(b.width, b.height) + ")";
      break;
    }
  }
  b.known = b.width > 0 && b.height > 0;
  b.pixels = b.width * b.height;
  if (g.resize != ResizeMode::Bucket) b.side_width = b.width, b.side_height = b.height;
  return b;
}

// A whole decimal joint index ("12"), refused otherwise: std::stoi("1x") is 1.
int joint_index(const std::string& text, const std::string& value) {
  constexpr int kMaxJoint = 1 << 16;
  if (text.empty() || text.size() > 6 ||
      text.find_first_not_of("0123456789") != std::string::npos || std::stoi(text) >= kMaxJoint)
    throw UsageError("--axis-angle " + value + ": '" + text +
                     "' is not a joint index (a whole number from 0, below " +
                     std::to_string(kMaxJoint) + ")");
  return std::stoi(text);
}

// --points/--boxes/--points3d/--axis-angle/--camera/--polygons/--masks: each field one kind,
// once; a hand's pose with the other hand's; masks from images.
void check_geometric_kinds(const ConvertOptions& o) {
  const TransformOptions& t = o.transform;
  std::vector<std::pair<std::string, std::string>> seen;  // field, flag
  auto add = [&](const std::string& name, const char* flag) {
    if (name.empty()) throw UsageError(std::string(flag) + " needs a field name");
    for (const auto& [n, f] : seen)
      if (n == name)
        throw UsageError("field '" + name + "' is declared by both " + f + " and " + flag +
                         ": a field has one geometric kind; declare it once");
    seen.emplace_back(name, flag);
  };
  for (const auto& n : t.points) add(n, "--points");
  for (const auto& b : t.boxes) add(b.first, "--boxes");
  for (const auto& n : t.points3d) add(n, "--points3d");
  for (const auto& a : t.axis_angle) add(a.name, "--axis-angle");
  for (const auto& c : t.cameras) add(c.name, "--camera");
  for (const auto& n : t.polygons) add(n, "--polygons");
  for (size_t i = 0; i < t.masks.size(); ++i) {
    if (t.masks[i].empty()) throw UsageError("--masks needs a field name");
    if (std::find(t.masks.begin(), t.masks.begin() + static_cast<std::ptrdiff_t>(i), t.masks[i]) !=
        t.masks.begin() + static_cast<std::ptrdiff_t>(i))
      throw UsageError("--masks " + t.masks[i] + " is given twice");
    const std::string kind = "__" + t.masks[i] + "__";
    for (const auto& d : o.members.dense)
      if (format::dense_blob_kind(d) == kind)
        throw UsageError("--masks " + t.masks[i] + " would store its masks as blob kind " + kind +
                         ", which --dense " + d + " stores already; rename one of them");
  }
  if (!t.masks.empty() && o.members.no_images)
    throw UsageError(
        "--masks rasterises masks in each sample's image; it cannot be combined "
        "with --no-images");
  int left = 0, right = 0;
  for (const auto& a : t.axis_angle) {
    left += a.layout == "mano-left";
    right += a.layout == "mano-right";
  }
  if (left > 1 || right > 1 || left != right)
    throw UsageError(
        "--axis-angle NAME:mano-left and NAME:mano-right come as one pair (a flip exchanges the "
        "two hands' fields): give each once, the left hand's field and the right hand's; got " +
        std::to_string(left) + " mano-left and " + std::to_string(right) + " mano-right");
}

}  // namespace

int64_t output_side_limit(OutputFormat f) {
  switch (f) {
    case OutputFormat::Jpeg:
      return 65500;  // libjpeg's JPEG_MAX_DIMENSION
    case OutputFormat::Webp:
      return 16383;  // WEBP_MAX_DIMENSION: the bitstream's 14-bit sides
    case OutputFormat::Png:
      return 1000000;  // libpng's default user limit: readers refuse wider or taller PNGs
    case OutputFormat::Raw:
    case OutputFormat::Keep:
      break;
  }
  return INT32_MAX;
}

int output_channels(ChannelMode c) {
  return c == ChannelMode::One ? 1 : 3;
}

void check_output_size(int64_t width, int64_t height, const TransformOptions& t,
                       uint64_t max_pixels) {
  if (t.format == OutputFormat::Keep) return;
  const int64_t limit = output_side_limit(t.format);
  if (std::max(width, height) > limit)
    throw SampleError("the output image would be " + size_text(width, height) + ": " +
                          format_name(t.format) + " images are at most " + std::to_string(limit) +
                          " pixels a side (--format)",
                      ErrorCode::BadImage);
  if (uint64_t(width) * uint64_t(height) > max_pixels)
    throw SampleError("the output image would be " + size_text(width, height) + " = " +
                          std::to_string(width * height) + " pixels, over --max-pixels " +
                          std::to_string(max_pixels),
                      ErrorCode::BadImage);
}

void check_output_bound(const ConvertOptions& o) {
  const TransformOptions& t = o.transform;
  if (t.format == OutputFormat::Keep || o.members.no_images) return;
  const OutputBound b = output_bound(t.geometry);
  if (!b.known) return;
  if (uint64_t(b.pixels) > o.limits.max_pixels) {
    // What one worker thread holds for a sample: the decoded image (<= --max-pixels x 3 B), the
    // warped output and its encoded bytes (up to the output's size again for PNG or raw).
    const int ch = output_channels(t.channels);
    const uint64_t out_bytes = uint64_t(b.pixels) * ch;
    const uint64_t bound = o.limits.max_pixels * ch;
    const int threads = std::max(1, o.run.threads);
    throw UsageError(
        b.flags + " needs " + format_bytes(out_bytes) + " per thread for the output image (" +
        size_text(b.width, b.height) + "x" + std::to_string(ch) + ")" +
        (threads > 1 ? ", " + format_bytes(out_bytes * threads) + " with " +
                           std::to_string(threads) + " threads,"
                     : std::string(",")) +
        " over the bound of " + format_bytes(bound) + " (--max-pixels " +
        std::to_string(o.limits.max_pixels) + " x " + std::to_string(ch) +
        " channels: an output image is bounded as a decoded one is); choose a smaller --size, "
        "or raise --max-pixels");
  }
  const int64_t limit = output_side_limit(t.format);
  if (b.side() > limit)
    throw UsageError(
        b.flags + ": " + format_name(t.format) + " images are at most " + std::to_string(limit) +
        " pixels a side, and " +
        (b.at_least                               ? "every output is at least "
         : t.geometry.resize == ResizeMode::Exact ? "every output is "
                                                  : "an output may be ") +
        size_text(b.side_width, b.side_height) +
        (t.format == OutputFormat::Webp && b.side() <= output_side_limit(OutputFormat::Jpeg)
             ? "; use --format jpg or png, or a smaller --size"
         : t.format != OutputFormat::Png ? "; use --format png or a smaller --size"
                                         : "; choose a smaller --size"));
}

void check_channels_format(const TransformOptions& t) {
  if (t.channels == ChannelMode::Three) return;
  const std::string channels = t.channels == ChannelMode::One ? "1" : "keep";
  if (t.format == OutputFormat::Webp || t.format == OutputFormat::Raw)
    throw UsageError("--channels " + channels + " cannot be stored with --format " +
                     (t.format == OutputFormat::Webp ? "webp" : "raw") +
                     ": WebP and raw images are always 3-channel (WebP has no grey images); use "
                     "--format jpg or png, or --channels 3");
  if (t.format == OutputFormat::Keep && t.channels == ChannelMode::One)
    throw UsageError(
        "--channels 1 cannot be stored with --format keep: the source bytes are stored as they "
        "are, so they cannot be converted to grey; use --format jpg or png");
}

void check_part(const PartOptions& p) {
  if (p.count == 0) throw UsageError("--shard I/0: the part count must be at least 1");
  if (p.index >= p.count)
    throw UsageError("--shard " + std::to_string(p.index) + "/" + std::to_string(p.count) +
                     ": the part index must be below the part count (parts are numbered from 0)");
}

void check_convert_options(const ConvertOptions& o) {
  // Every s3:// name checked before anything is listed, read or written (parse_s3 refuses
  // empty, '.' and '..' parts): a usage error, for the input, the table and the output alike.
  std::vector<std::string> names = o.source.inputs;
  names.push_back(o.table.path);
  names.push_back(o.output);
  for (const auto& name : names) try {
      if (remote::is_s3(name)) remote::parse_s3(name);
    } catch (const ParseError& e) {
      throw UsageError(e.what());
    }
  const TransformOptions& t = o.transform;
  if (t.format == OutputFormat::Keep &&
      (t.geometry.crop != CropMode::None || t.geometry.resize != ResizeMode::None))
    throw UsageError(
        "--format keep stores the source bytes untouched; it cannot be combined "
        "with --crop or --size");
  check_channels_format(t);
  if (o.labels.classes_from_dirs && o.members.no_images)
    throw UsageError(
        "--classes-from-dirs takes each sample's class from the folder of its image; it cannot "
        "be combined with --no-images");
  if (o.labels.classes_from_dirs && o.labels.classes.empty() && reads_stdin(o))
    throw UsageError(
        "--classes-from-dirs reads the inputs' names first, so it cannot read standard input "
        "('-')");
  if (!o.table.path.empty() && o.members.no_images)
    throw UsageError(
        "--table: rows are made from the images they name; it cannot be combined "
        "with --no-images");
  const TableOptions& to = o.table.options;
  if (o.table.path.empty() && (!to.image_column.empty() || !to.list_columns.empty() ||
                               !o.table.prefix.empty() || to.format != TableFormat::Auto))
    throw UsageError(
        "--table-image, --table-columns, --table-prefix and --table-format describe a --table "
        "FILE; give one");
  if (o.labels.instances.empty() && !o.labels.instance_fields.empty())
    throw UsageError("--instance-fields slices the fields of --instances FIELD; give one");
  if (t.geometry.fit_aspect && (t.geometry.width == 0 || t.geometry.height == 0))
    throw UsageError(
        "--fit-aspect grows the region to the aspect ratio of --size, so it needs --size WxH");
  if (!o.table.path.empty() && !o.labels.instances.empty())
    throw UsageError(
        "--instances splits per-sample label files; with --table each row is "
        "already one output");
  if (o.members.on_duplicate == OnDuplicate::Last && reads_stdin(o))
    throw UsageError(
        "--on-duplicate last reads the inputs twice (member names first), so it cannot read "
        "standard input ('-'); use first or error");
  const DedupOptions& d = o.dedup;
  if (d.enabled() && o.members.no_images)
    throw UsageError("--dedup compares images, so it cannot be combined with --no-images");
  if (d.enabled() && (!o.table.path.empty() || !o.labels.instances.empty()))
    throw UsageError(std::string("--dedup compares source images, and with ") +
                     (o.table.path.empty() ? "--instances" : "--table") +
                     " several outputs share one image; convert without it, or leave out --dedup");
  if (d.enabled() && (d.distance < 0 || d.distance > 32))
    throw UsageError("--dedup near:" + std::to_string(d.distance) +
                     ": the distance must be 0 to 32 bits");
  if (!d.enabled() && !d.against.empty())
    throw UsageError(
        "--dedup-against drops samples that duplicate another dataset's; it needs --dedup exact "
        "or --dedup near[:D]");
  for (const auto& in : o.source.inputs)
    if (is_pipe(in)) pipe_command(in);  // UsageError for a pipe: naming no command
  check_geometric_kinds(o);
  check_part(o.part);
  check_output_bound(o);
}

AxisAngleField parse_axis_angle_field(const std::string& text) {
  AxisAngleField a;
  const size_t colon = text.find(':');
  a.name = text.substr(0, colon);
  if (a.name.empty()) throw UsageError("--axis-angle '" + text + "' needs a field name");
  if (colon == std::string::npos) return a;  // root
  const std::string layout = text.substr(colon + 1);
  if (layout.starts_with("pairs:")) {
    a.layout = "pairs";
    a.joints = 0;  // as many as each value holds
    const std::string list = layout.substr(6);
    if (list.empty())
      throw UsageError("--axis-angle " + text + ": pairs: needs joint pairs, as pairs:1-2,4-5");
    std::vector<int> used;
    size_t at = 0;
    while (at <= list.size()) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string pair = list.substr(at, comma - at);
      const size_t dash = pair.find('-');
      if (dash == std::string::npos)
        throw UsageError("--axis-angle " + text + ": '" + pair +
                         "' is not a pair of joint indices A-B (0-based)");
      const int x = joint_index(pair.substr(0, dash), text);
      const int y = joint_index(pair.substr(dash + 1), text);
      for (int j : {x, y})
        if (std::find(used.begin(), used.end(), j) != used.end() || x == y)
          throw UsageError("--axis-angle " + text + ": pair " + pair + " names joint " +
                           std::to_string(j) +
                           " a second time; each joint is in at most one pair (a flip swaps "
                           "the two joints of a pair)");
      used.push_back(x);
      used.push_back(y);
      a.pairs.emplace_back(x, y);
      at = comma + 1;
    }
    return a;
  }
  const auto known = axis_angle_layout(layout);
  if (!known)
    throw UsageError("--axis-angle " + text + ": unknown layout '" + layout +
                     "'; use root, smpl, smpl-body, smplx-body, mano-left, mano-right or "
                     "pairs:A-B,C-D,...");
  a.layout = layout;
  a.joints = known->joints;
  a.pairs = known->pairs;
  return a;
}

CameraField parse_camera_field(const std::string& text) {
  CameraField c;
  const size_t colon = text.find(':');
  c.name = text.substr(0, colon);
  if (c.name.empty()) throw UsageError("--camera '" + text + "' needs a field name");
  if (colon == std::string::npos) return c;
  const std::string convention = text.substr(colon + 1);
  if (convention == "edges")
    c.edges = true;
  else if (convention != "centers" && convention != "centres")
    throw UsageError("--camera " + text + ": '" + convention +
                     "' is not a convention; use centers (OpenCV's: the top-left pixel's centre "
                     "is (0, 0)) or edges (COLMAP's: it is (0.5, 0.5))");
  return c;
}

void check_table_geometry(const Table& table, const TransformOptions& t) {
  for (const TableColumn& c : table.columns) {
    if (!c.uniform) continue;  // rows of their own shapes: each is checked as it comes
    int64_t n = 1;
    for (int64_t d : c.row_shape) n *= d;
    const std::string where = "--table " + table.path + ": column '" + c.name +
                              "' has rows of shape " + shape_text(c.row_shape);
    for (const auto& a : t.axis_angle) {
      if (a.name != c.name) continue;
      const bool fits = !c.row_shape.empty() && n % 3 == 0 &&
                        (c.row_shape.back() == 3 || c.row_shape.back() == n) &&
                        (a.joints == 0 || n == 3 * a.joints);
      if (!fits)
        throw UsageError(where + ", which --axis-angle " + c.name + ":" + a.layout +
                         " cannot take: it needs [..., 3] or a flat [3 * joints]" +
                         (a.joints > 0 ? ", " + std::to_string(3 * a.joints) + " values (" +
                                             std::to_string(a.joints) + " joints)"
                                       : std::string()));
    }
    for (const auto& cam : t.cameras)
      if (cam.name == c.name && c.row_shape != std::vector<int64_t>{3, 3} &&
          c.row_shape != std::vector<int64_t>{4})
        throw UsageError(where + ", which --camera " + c.name +
                         " cannot take: it needs [3, 3] (K) or [4] (fx, fy, cx, cy)");
  }
}

std::vector<std::pair<std::string, FieldGeometry>> declared_kinds(const TransformOptions& t) {
  std::vector<std::pair<std::string, FieldGeometry>> out;
  for (const auto& n : t.points) out.push_back({n, {.kind = GeometryKind::Points}});
  for (const auto& [n, xyxy] : t.boxes)
    out.push_back({n,
                   {.kind = GeometryKind::Boxes,
                    .xyxy = xyxy,
                    .edges = t.geometry.box_convention == BoxConvention::Edges}});
  for (const auto& n : t.points3d) out.push_back({n, {.kind = GeometryKind::Points3d}});
  for (const auto& a : t.axis_angle) {
    FieldGeometry g{
        .kind = GeometryKind::AxisAngle, .layout = a.layout, .joints = a.joints, .pairs = a.pairs};
    const std::string other = a.layout == "mano-left"    ? "mano-right"
                              : a.layout == "mano-right" ? "mano-left"
                                                         : "";
    if (!other.empty())
      for (const auto& b : t.axis_angle)
        if (b.layout == other) g.partner = b.name;
    out.push_back({a.name, std::move(g)});
  }
  // The layout (K or fxfycxcy) is the column's shape's: Schema::specs() fills it in.
  for (const auto& c : t.cameras)
    out.push_back({c.name, {.kind = GeometryKind::Camera, .edges = c.edges}});
  for (const auto& n : t.polygons) out.push_back({n, {.kind = GeometryKind::Polygons}});
  return out;
}

}  // namespace tarmac
