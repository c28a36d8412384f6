#include "convert/convert_options.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "remote/url.h"
#include "source/pipe_stream.h"

namespace tarmac {
namespace {

bool reads_stdin(const ConvertOptions& o) {
  return std::find(o.source.inputs.begin(), o.source.inputs.end(), "-") != o.source.inputs.end();
}

}  // namespace

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
}

}  // namespace tarmac
