#include "convert/sample_processor.h"

#include <optional>

#include "common/error.h"
#include "convert/image_source.h"
#include "convert/instances.h"
#include "convert/member_roles.h"
#include "convert/sample_context.h"
#include "convert/sample_labels.h"
#include "convert/table_plan.h"

namespace tarmac {
namespace {

// Several outputs from one source: the first is `first`, the others go to first.more.
void gather(std::vector<ProcessedSample>&& outs, ProcessedSample& first) {
  first = std::move(outs.front());
  for (size_t i = 1; i < outs.size(); ++i) first.more.push_back(std::move(outs[i]));
}

// An output that failed for `error` (with its code), before anything of it was made.
ProcessedSample failed(const std::string& key, uint32_t input, std::string error, ErrorCode code) {
  ProcessedSample r;
  r.key = key;
  r.input = input;
  r.error = std::move(error);
  r.error_code = code;
  return r;
}

// Renders each label set of a sample from one ImageSource (made once), into `result` and its
// `more`: the sets' outputs in order, each keyed by `keys`.
void render_all(const RawSample& raw, const Member* image, const std::vector<const Member*>& dense,
                const std::vector<std::string>& dense_suffixes,
                std::vector<std::vector<SampleField>>&& sets, const std::vector<std::string>& keys,
                const SampleRecipe& recipe, const std::vector<IgnoredMember>& ignored,
                ProcessedSample& result) {
  std::vector<ProcessedSample> outs(sets.size());
  for (size_t i = 0; i < sets.size(); ++i) {
    outs[i].key = keys[i];
    outs[i].input = raw.input;
  }
  SampleContext ctx;
  std::optional<ImageSource> src;
  ProcessedSample source_error;
  if (image)
    guarded(source_error, ctx,
            [&] { src.emplace(*image, dense, dense_suffixes, recipe, sets.size() == 1, ctx); });
  for (size_t i = 0; i < sets.size(); ++i) {
    ProcessedSample& out = outs[i];
    if (!source_error.error.empty()) {
      out.error = source_error.error;
      out.error_code = source_error.error_code;
      continue;
    }
    SampleContext row_ctx;
    guarded(out, row_ctx, [&] {
      if (src) src->render(sets[i], out, row_ctx);
    });
    out.fields = std::move(sets[i]);
    if (out.error.empty()) select_fields(out.fields, recipe.labels);
  }
  outs.front().ignored = ignored;
  gather(std::move(outs), result);
}

// A sample's members sorted and its labels read (into out.fields), each refusal thrown for
// guarded(): the members that are missing are checked after the labels, as the order of the
// messages has always been.
SampleMembers read_sample(const RawSample& raw, const std::vector<const Member*>& members,
                          const SampleRecipe& recipe, ProcessedSample& out, SampleContext& ctx) {
  const MemberRoles& roles = recipe.members;
  SampleMembers s = sort_members(members, roles);
  out.ignored = s.ignored;
  for (const auto& [m, ext] : s.labels) {
    ctx.member = &m->name;
    ctx.parse_code = label_error_code(ext);
    parse_label_member(*m, ext, recipe.limits.max_label_size, out.fields);
  }
  ctx.member = nullptr;
  check_required(out.fields, recipe.labels);
  if (!roles.no_images) {
    check_image_found(s, raw, roles);
    if (recipe.labels.classes_from_dirs) add_class(*s.image, recipe.labels.classes, out.fields);
    check_dense_found(s, roles);
  }
  return s;
}

// process_table_group's rows whose labels are refused before any decoding go to `bad`; the
// others' label sets and keys are returned.
void table_row_sets(const RawSample& raw, const TableGroup& g, const TablePlan& plan,
                    const SampleRecipe& recipe, std::vector<std::vector<SampleField>>& sets,
                    std::vector<std::string>& keys, std::vector<ProcessedSample>& bad) {
  SampleContext ctx;
  for (uint64_t row : g.rows) {
    ProcessedSample r;
    r.key = plan.row_key(g, row);
    r.input = raw.input;
    std::vector<SampleField> fields = plan.row_fields(row);
    guarded(r, ctx, [&] {
      check_required(fields, recipe.labels);
      if (recipe.labels.classes_from_dirs)
        add_class(raw.members.front(), recipe.labels.classes, fields);
    });
    if (!r.error.empty()) {
      bad.push_back(std::move(r));
      continue;
    }
    sets.push_back(std::move(fields));
    keys.push_back(r.key);
  }
}

// Why none of a table group's rows can be rendered, or "" when they can: the reader's error,
// a member that did not inflate, a member missing.
std::pair<std::string, ErrorCode> members_failure(const RawSample& raw, const TableGroup& g,
                                                  const ProcessedSample& unpack_error) {
  if (!raw.errors.empty()) return {raw.errors.front(), raw.error_code};
  if (!unpack_error.error.empty()) return {unpack_error.error, unpack_error.error_code};
  if (raw.members.size() != g.paths.size())
    return {"the sample's members are incomplete", ErrorCode::MissingMember};
  return {"", ErrorCode::None};
}

}  // namespace

ProcessedSample process_sample(const RawSample& raw, const SampleRecipe& recipe) {
  ProcessedSample out;
  out.key = raw.key;
  out.input = raw.input;
  SampleContext ctx;
  SampleMembers s;
  bool done = false;  // the outputs are made (several: instances)
  // Zip members are inflated and checked here, on a worker, not by the reader thread; the
  // inflated bytes live as long as the outputs are being made.
  std::vector<Member> inflated;
  guarded(out, ctx, [&] {
    if (!raw.errors.empty()) throw SampleError(raw.errors.front(), raw.error_code);
    check_label_sizes(raw, recipe.members, recipe.limits.max_label_size);
    s = read_sample(raw, unpacked_members(raw, inflated, ctx), recipe, out, ctx);
    const LabelRecipe& labels = recipe.labels;
    if (labels.instances.empty()) return;
    auto sets = split_instances(out.fields, labels, recipe.limits);
    if (sets.empty())
      throw SampleError("instances field '" + labels.instances + "' has no entries (--instances)",
                        ErrorCode::NoInstances);
    std::vector<std::string> keys;
    for (size_t k = 0; k < sets.size(); ++k) keys.push_back(raw.key + "/" + std::to_string(k));
    render_all(raw, recipe.members.no_images ? nullptr : s.image, s.dense, recipe.members.dense,
               std::move(sets), keys, recipe, out.ignored, out);
    done = true;
  });
  if (done || !out.error.empty()) return out;
  if (recipe.members.no_images) {
    select_fields(out.fields, recipe.labels);
    return out;
  }
  std::vector<std::vector<SampleField>> one;
  one.push_back(std::move(out.fields));
  render_all(raw, s.image, s.dense, recipe.members.dense, std::move(one), {raw.key}, recipe,
             out.ignored, out);
  return out;
}

ProcessedSample process_table_group(const RawSample& raw, const TablePlan& plan,
                                    const SampleRecipe& recipe) {
  const TableGroup& g = plan.groups()[static_cast<size_t>(raw.table_group)];
  ProcessedSample out;
  out.key = g.key;
  out.input = raw.input;
  std::vector<ProcessedSample> bad;  // rows whose labels are refused before any decoding
  SampleContext ctx;
  ProcessedSample too_many;
  guarded(too_many, ctx, [&] {
    check_output_count(g.rows.size(), "image '" + g.paths.front() + "' is named by", "table rows",
                       recipe.limits);
  });
  if (!too_many.error.empty()) {
    // Every row is bad; under --on-error fail the first stops the run, so one is enough.
    for (uint64_t row : g.rows) {
      bad.push_back(failed(plan.row_key(g, row), raw.input, too_many.error, too_many.error_code));
      if (!recipe.skip_errors) break;
    }
    gather(std::move(bad), out);
    return out;
  }
  std::vector<std::vector<SampleField>> sets;
  std::vector<std::string> keys;
  table_row_sets(raw, g, plan, recipe, sets, keys, bad);
  std::vector<Member> inflated;
  std::vector<const Member*> members;
  ProcessedSample unpack_error;
  guarded(unpack_error, ctx, [&] { members = unpacked_members(raw, inflated, ctx); });
  auto [why, code] = members_failure(raw, g, unpack_error);
  if (why.empty() && sets.empty()) {
    why = "the sample's members are incomplete";  // no row left to render
    code = ErrorCode::MissingMember;
  }
  if (!why.empty()) {
    // The members did not all come (or the rows are all refused): each row says why.
    for (const auto& key : keys) bad.push_back(failed(key, raw.input, why, code));
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
      for (const auto& key : keys)
        bad.push_back(
            failed(key, raw.input,
                   "member '" + name +
                       "': a .npy dense map named by a table column is not supported; with "
                       "--table, dense maps must be images (PNG, TIFF, ...)",
                   ErrorCode::BadDenseMap));
      gather(std::move(bad), out);
      return out;
    }
    dense.push_back(members[i]);
    suffixes.push_back(recipe.members.dense[i - 1] + "." + (ext.empty() ? "png" : ext));
  }
  render_all(raw, members.front(), dense, suffixes, std::move(sets), keys, recipe, {}, out);
  for (auto& b : bad) out.more.push_back(std::move(b));
  return out;
}

}  // namespace tarmac
