#include "convert/fingerprint.h"

#include <chrono>
#include <filesystem>
#include <system_error>

#include "common/crc32.h"
#include "common/version.h"
#include "convert/table_input.h"
#include "table/table.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// What must not change between an interrupted run and its --resume: every option that shapes
// the output (not -j, --overwrite or --resume), the part, and each input file's size and
// modification time.
json output_options(const ConvertOptions& o) {
  static constexpr const char* kCrop[] = {"none", "center", "box", "field"};
  static constexpr const char* kResize[] = {"exact", "shorter", "longer", "fit", "none", "bucket"};
  const GeometryOptions& g = o.transform.geometry;
  json crop = {{"mode", kCrop[static_cast<int>(g.crop)]}};
  if (g.crop == CropMode::Box) crop["box"] = {g.box.x0, g.box.y0, g.box.x1, g.box.y1};
  if (g.crop == CropMode::Field)
    crop["field"] = o.transform.crop_field + (o.transform.crop_field_xyxy ? ":xyxy" : ":xywh");
  json boxes = json::array();
  for (const auto& [name, xyxy] : o.transform.boxes)
    boxes.push_back(name + (xyxy ? ":xyxy" : ":xywh"));
  json j = {
      {"--key-rule", key_rule_name(o.members.key_rule)},
      {"--image", o.members.image_exts},
      {"--no-images", o.members.no_images},
      {"--classes-from-dirs", o.labels.classes_from_dirs},
      {"--dense", o.members.dense},
      {"--ragged", o.labels.ragged},
      {"--fields", o.labels.keep_fields},
      {"--drop-fields", o.labels.drop_fields},
      {"--require", o.labels.require_fields},
      {"--crop", crop},
      {"--box-convention", g.box_convention == BoxConvention::Edges ? "edges" : "centers"},
      {"--resample", g.resample == ResampleMode::Area ? "area" : "area-exact"},
      {"--crop-scale", g.crop_scale},
      {"--square", g.square},
      {"--fit-aspect", g.fit_aspect},
      {"--table", o.table.path},
      {"--table-format", table_format_name(o.table.options.format)},
      {"--table-image", o.table.options.image_column},
      {"--table-columns", o.table.options.list_columns},
      {"--table-prefix", o.table.prefix},
      {"--instances", o.labels.instances},
      {"--instance-fields", o.labels.instance_fields},
      {"--size", {g.width, g.height}},
      {"--resize", kResize[static_cast<int>(g.resize)]},
      {"--bucket-step", g.bucket_step},
      {"--bucket-max-ratio", g.bucket_max_ratio},
      {"--points", o.transform.points},
      {"--boxes", boxes},
      {"--pad-value", o.transform.pad_value},
      {"--format",
       o.transform.format == OutputFormat::Keep ? "keep" : format_extension(o.transform.format)},
      {"--quality", o.transform.quality},
      {"--channels", o.transform.channels == ChannelMode::One    ? "1"
                     : o.transform.channels == ChannelMode::Keep ? "keep"
                                                                 : "3"},
      {"--max-pixels", o.limits.max_pixels},
      {"--max-member-size", o.limits.max_member_size},
      {"--max-label-size", o.limits.max_label_size},
      {"--max-outputs-per-sample", o.limits.max_outputs_per_sample},
      {"--group-window", o.limits.group_window},
      {"--shard-size", o.limits.shard_size},
      {"--on-error", o.run.skip_errors ? "skip" : "fail"},
      {"--on-duplicate", on_duplicate_name(o.members.on_duplicate)}};
  // The geometric kinds of #38, only when given (as --dedup below).
  const TransformOptions& t = o.transform;
  if (!t.points3d.empty()) j["--points3d"] = t.points3d;
  if (!t.axis_angle.empty()) {
    json a = json::array();
    for (const auto& f : t.axis_angle) {
      std::string layout = f.layout;
      if (f.layout == "pairs") {
        layout += ":";
        for (size_t i = 0; i < f.pairs.size(); ++i)
          layout += (i ? "," : "") + std::to_string(f.pairs[i].first) + "-" +
                    std::to_string(f.pairs[i].second);
      }
      a.push_back(f.name + ":" + layout);
    }
    j["--axis-angle"] = a;
  }
  if (!t.cameras.empty()) {
    json c = json::array();
    for (const auto& f : t.cameras) c.push_back(f.name + (f.edges ? ":edges" : ":centers"));
    j["--camera"] = c;
  }
  if (!t.polygons.empty()) j["--polygons"] = t.polygons;
  if (!t.masks.empty()) j["--masks"] = t.masks;
  // Only when given, so that the options of a run without it read as before.
  if (o.dedup.enabled())
    j["--dedup"] = o.dedup.mode == DedupOptions::Mode::Exact
                       ? std::string("exact")
                       : "near:" + std::to_string(o.dedup.distance);
  return j;
}

json run_fingerprint(const ConvertOptions& o, const std::vector<std::string>& inputs,
                     const Table* table) {
  const json opts = output_options(o);
  // A file's identity: path, size and modification time.
  auto identity = [](const std::string& path) {
    json j = {{"path", path}};
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      j["size"] = fs::file_size(path, ec);
      j["mtime_ns"] = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               fs::last_write_time(path, ec).time_since_epoch())
                                               .count());
    }
    return j;
  };
  json ins = json::array();
  for (const auto& in : inputs) ins.push_back(identity(in));
  json fp = {{"version", kVersion},
             {"options", opts},
             {"part", {o.part.index, o.part.count}},
             {"inputs", ins}};
  // A directory input's fingerprint is its path only: a class folder added since would shift
  // every index after it.
  if (o.labels.classes_from_dirs) fp["classes"] = o.labels.classes;
  if (!o.table.path.empty()) {
    fp["table"] = identity(o.table.path);
    if (table && table_is_remote_or_pipe(o.table.path)) {
      fp["table"]["size"] = table->bytes;
      fp["table"]["crc32"] = table->crc32;
    }
  }
  // "dedup_against" is added by plan_run once each reference is verified (dedup_references).
  return fp;
}

}  // namespace tarmac
