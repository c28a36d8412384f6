#include "convert/stage_specs.h"

#include "convert/fingerprint.h"

namespace tarmac {

SampleRecipe sample_recipe(const ConvertOptions& o) {
  SampleRecipe r;
  r.members.key_rule = o.members.key_rule;
  r.members.image_exts = o.members.image_exts;
  r.members.no_images = o.members.no_images;
  r.members.dense = o.members.dense;
  r.labels.classes_from_dirs = o.labels.classes_from_dirs;
  r.labels.classes = o.labels.classes;
  r.labels.instances = o.labels.instances;
  r.labels.instance_fields = o.labels.instance_fields;
  r.labels.keep_fields = o.labels.keep_fields;
  r.labels.drop_fields = o.labels.drop_fields;
  r.labels.require_fields = o.labels.require_fields;
  r.transform = o.transform;
  r.dedup = o.dedup.mode;
  r.limits.max_pixels = o.limits.max_pixels;
  r.limits.max_label_size = o.limits.max_label_size;
  r.limits.max_outputs_per_sample = o.limits.max_outputs_per_sample;
  r.skip_errors = o.run.skip_errors;
  return r;
}

WriterSpec writer_spec(const ConvertOptions& o) {
  WriterSpec w;
  w.images = !o.members.no_images;
  w.format = o.transform.format;
  w.dense = o.members.dense;
  w.masks = o.transform.masks;
  w.ragged = o.labels.ragged;
  w.geometry = declared_kinds(o.transform);
  if (o.labels.classes_from_dirs) w.classes = o.labels.classes;
  w.shard_size = o.limits.shard_size;
  return w;
}

FeedSpec feed_spec(const ConvertOptions& o) {
  FeedSpec f;
  f.key_rule = o.members.key_rule;
  f.image_exts = o.members.image_exts;
  f.dense = o.members.dense;
  f.on_duplicate = o.members.on_duplicate;
  f.skip_errors = o.run.skip_errors;
  f.group_window = o.limits.group_window;
  f.part = o.part;
  f.table_prefix = o.table.prefix;
  f.progress = o.run.progress;
  return f;
}

RecorderSpec recorder_spec(const ConvertOptions& o) {
  RecorderSpec r;
  r.skip_errors = o.run.skip_errors;
  r.inputs = o.source.inputs;
  r.checkpoint_seconds = o.run.checkpoint_seconds;
  r.dedup = o.dedup;
  return r;
}

RemoteOutputSpec remote_output_spec(const ConvertOptions& o) {
  RemoteOutputSpec r;
  r.endpoint_url = o.source.endpoint_url;
  r.options = o.remote_output;
  r.overwrite = o.run.overwrite;
  r.resume = o.run.resume;
  r.command_line = o.provenance.command_line;
  r.stop = o.run.stop;
  return r;
}

ManifestSpec manifest_spec(const ConvertOptions& o) {
  ManifestSpec m;
  m.command_line = o.provenance.command_line;
  m.options_json = o.provenance.options_json;
  m.output_options = output_options(o);
  m.part = o.part;
  m.run_inputs = o.source.inputs.size();
  return m;
}

}  // namespace tarmac
