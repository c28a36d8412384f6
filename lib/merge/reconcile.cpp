// The merged schema (merge_internal.h): the parts' fields made one, as one run over all their
// samples would have typed them: dtypes promoted, fixed and ragged reconciled, strings beside
// other kinds stored as JSON text (each part told how to render its values, Part::render).
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/field_spec.h"
#include "format/layout.h"
#include "merge/merge_internal.h"

namespace tarmac::merge_detail {

namespace {

// The union of the parts' fields, in order of first appearance: a field some part lacks
// (its samples never had it: an optional field) is nullable in the merge.
std::vector<std::string> field_names(const std::vector<const Part*>& parts) {
  std::vector<std::string> names;
  for (const auto& p : parts)
    for (const auto& f : p->a.fields())
      if (std::find(names.begin(), names.end(), f.spec.name) == names.end())
        names.push_back(f.spec.name);
  return names;
}

// Field `name` over all parts (see reconcile).
FieldSpec reconcile_field(const std::vector<const Part*>& parts, const std::string& name) {
  // The kind one run would give: that of the parts whose values say something (not only
  // nulls or empty lists).
  std::set<FieldKind> kinds;
  bool empty_lists = false;
  for (const auto& p : parts)
    if (const FieldLayout* fl = field_of(*p, name)) {
      if (only_empty_lists(*p, *fl))
        empty_lists = true;
      else
        kinds.insert(fl->spec.kind);
    }
  const bool to_json_ok = joined_as_json(kinds, empty_lists);
  std::optional<FieldSpec> o;
  const Part* shaped_by = nullptr;
  bool lacked = false;        // a part before `o` was set lacks the field
  bool beside_empty = false;  // some part holds only empty lists beside numbers
  bool empty_nullable = false;
  for (const auto& p : parts) {
    const FieldLayout* fl = field_of(*p, name);
    if (!fl) {
      lacked = true;
      if (o) o->nullable = true;
      continue;
    }
    FieldSpec f = fl->spec;
    p->render.erase(name);
    if (to_json_ok && f.kind != FieldKind::Json) {
      // Written as JSON text: "[]" for each empty list, each string quoted and escaped.
      p->render[name] =
          f.kind == FieldKind::String ? Part::Render::JsonString : Part::Render::EmptyList;
      f.kind = FieldKind::Json;
      f.dtype = DType::U8;
      f.shape = {-1};
      f.ragged = true;
    } else if (!kinds.empty() && only_empty_lists(*p, *fl)) {
      // Empty lists beside numbers: no dtype of their own; their rows stay empty.
      beside_empty = true;
      empty_nullable = empty_nullable || f.nullable;
      continue;
    }
    if (!o) {
      o = f;
      o->nullable = f.nullable || lacked;
      shaped_by = p;
      continue;
    }
    join_field_spec(*o, f, name, shaped_by->path, p->path);
    shaped_by = p;
  }
  if (o && beside_empty) {
    o->nullable = o->nullable || empty_nullable;
    if (!o->shape.empty()) {  // [] beside fixed-length lists: ragged, as one run makes it
      o->ragged = true;
      o->shape[0] = -1;
    }
  }
  if (!o) {  // null in every sample of every part: typed as the first part holding it
    for (const auto& p : parts)
      if (const FieldLayout* fl = p->a.layout().find_field(name); fl && !o) o = fl->spec;
    o->nullable = true;
  }
  return std::move(*o);
}

}  // namespace

// Strings and JSON values together are JSON, and a string beside an empty list is too (one
// run stores each as JSON text then); numbers beside either cannot be joined (join_field_spec
// refuses them).
bool joined_as_json(const std::set<FieldKind>& kinds, bool empty_lists) {
  const bool to_json = kinds.count(FieldKind::Json) ||
                       (kinds.count(FieldKind::String) && (kinds.size() > 1 || empty_lists));
  return to_json && !kinds.count(FieldKind::Numeric);
}

void join_field_spec(FieldSpec& o, const FieldSpec& f, const std::string& name,
                     const std::string& shaped_by, const std::string& part) {
  auto incompatible = [&](const std::string& here, const std::string& there) {
    return FatalError("field '" + name + "' is " + here + " in part '" + shaped_by + "' but " +
                      there + " in part '" + part + "'; the parts cannot be merged");
  };
  if (f.kind != o.kind)  // numbers in one part, other JSON values in another
    throw FatalError("field '" + name + "' is of kind " + std::string(kind_name(o.kind)) +
                     " in part '" + shaped_by + "' but of kind " + std::string(kind_name(f.kind)) +
                     " in part '" + part +
                     "'; the parts cannot be merged: one run over all their inputs keeps "
                     "such a field as JSON text (convert the inputs in one run)");
  if (o.kind == FieldKind::Numeric) o.dtype = promote(o.dtype, f.dtype);
  if (f.shape.size() != o.shape.size() ||
      !std::equal(f.shape.begin() + (f.shape.empty() ? 0 : 1), f.shape.end(),
                  o.shape.begin() + (o.shape.empty() ? 0 : 1)))
    throw incompatible("of shape " + shape_text(o.shape), "of shape " + shape_text(f.shape));
  if (!o.shape.empty() && (f.ragged || o.ragged || f.shape[0] != o.shape[0])) {
    if (!o.ragged && !f.ragged && !ragged_by_source(o.source))
      throw FatalError("field '" + name + "' has shape " + shape_text(o.shape) + " in part '" +
                       shaped_by + "' but " + shape_text(f.shape) + " in part '" + part +
                       "'; convert every part with --ragged " + name);
    o.ragged = true;
    o.shape[0] = -1;
  }
  o.nullable = o.nullable || f.nullable;
}

// The output schema: the same fields in every part; dtypes promoted; a field that is ragged
// in one part, or whose first axis differs between parts, becomes ragged (as convert would
// make it when the field comes from JSON or is ragged anyway).
std::vector<FieldSpec> reconcile(const std::vector<const Part*>& parts) {
  std::vector<FieldSpec> out;
  for (const auto& name : field_names(parts)) out.push_back(reconcile_field(parts, name));
  return out;
}

}  // namespace tarmac::merge_detail
