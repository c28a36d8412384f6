#pragma once
// The flags of `tarmac convert`: registered on a CLI11 command, held as typed, and turned into
// the library's ConvertOptions (docs/cli.md lists them).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/flag_values.h"
#include "convert/convert_options.h"
#include "source/member.h"
#include "source/sample_grouper.h"
#include "table/table.h"
#include "transform/image_codec.h"

namespace tarmac::cli {

/// Every flag of `tarmac convert` as the user gave it (defaults as --help shows them: the
/// library's own, read from its option structs, where the library has one).
struct ConvertFlags {
  std::vector<std::string> inputs;
  std::string output;
  std::string endpoint_url;    ///< --endpoint-url; "" = AWS_ENDPOINT_URL or AWS's own
  std::string checkpoint_dir;  ///< -o s3://: --checkpoint-dir; "" = the default
  std::string multipart_size = size_text(RemoteOutputOptions{}.multipart_size);
  bool no_lock = false;
  bool overwrite = false, resume = false;
  double checkpoint_every = RunControl{}.checkpoint_seconds;
  // Transform.
  std::string crop = "none";
  std::string box_convention = "edges";
  double crop_scale = GeometryOptions{}.crop_scale;
  bool square = false, fit_aspect = false;
  std::string size, resize;  ///< "" = not given
  std::string resample = "area";
  int bucket_step = GeometryOptions{}.bucket_step;
  double bucket_max_ratio = GeometryOptions{}.bucket_max_ratio;
  std::vector<std::string> points, boxes, dense;
  std::vector<std::string> points3d, axis_angle, camera, polygons, masks;  ///< as given
  double pad_value = TransformOptions{}.pad_value;
  std::string format = format_extension(TransformOptions{}.format);
  int quality = TransformOptions{}.quality;
  std::string channels = "3";
  // Input.
  std::string key_rule = key_rule_name(MemberOptions{}.key_rule);
  std::vector<std::string> image = MemberOptions{}.image_exts;
  bool no_images = false;
  bool classes_from_dirs = false;
  std::vector<std::string> ragged;
  std::vector<std::string> keep_fields, drop_fields, require_fields;
  // Tables and instances.
  std::string table, table_format = table_format_name(TableOptions{}.format), table_image,
                     table_prefix;
  std::string max_table_size = size_text(TableOptions{}.max_bytes);
  std::vector<std::string> table_columns;
  std::string instances;
  std::vector<std::string> instance_fields;
  uint64_t max_pixels = ConvertLimits{}.max_pixels;
  std::string max_member_size = size_text(ConvertLimits{}.max_member_size);
  std::string max_label_size = size_text(ConvertLimits{}.max_label_size);
  std::string group_window = size_text(ConvertLimits{}.group_window);
  int64_t max_outputs_per_sample = static_cast<int64_t>(ConvertLimits{}.max_outputs_per_sample);
  // Behaviour.
  std::string shard_size = size_text(ConvertLimits{}.shard_size);
  int threads = RunControl{}.threads;  ///< 0 = all cores
  std::string shard;                   ///< --shard I/N; "" = the whole input
  std::string on_error = "fail";       // RunControl{}.skip_errors is false
  std::string on_duplicate = on_duplicate_name(MemberOptions{}.on_duplicate);
  bool allow_empty = false;
  std::string dedup;  ///< --dedup exact|near[:D]; "" = none
  std::vector<std::string> dedup_against;
  // Display (not options of the conversion).
  std::string progress = "auto";
  double progress_every = 10;
};

/// Registers the flags of `tarmac convert` on `app`, to be parsed into `f` (which must outlive
/// the parse).
void add_convert_flags(CLI::App& app, ConvertFlags& f);

/// The options the flags ask for (threads 0 becomes the number of cores); throws
/// CLI::ValidationError naming the flag and why when one is malformed or they contradict.
ConvertOptions convert_options(const ConvertFlags& f);

/// The options as the command line of a parsed `app` sets them (given or default, by flag
/// name), with `threads` as resolved: the manifest's "options".
std::string options_json(const CLI::App& app, int threads);

}  // namespace tarmac::cli
