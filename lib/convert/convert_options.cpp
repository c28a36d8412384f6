#include "convert/convert_options.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/bytes.h"
#include "common/error.h"
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
  check_part(o.part);
  check_output_bound(o);
}

}  // namespace tarmac
