#include "read/geometry.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "format/field_geometry.h"
#include "format/json_object.h"
#include "format/manifest.h"
#include "format/names.h"

namespace tarmac {
namespace {

using json = nlohmann::ordered_json;

// A field's geometry as the format parsed it (format/field_geometry.h: the one parser of the
// schema's key, run when the dataset opened), in the augmentation's terms.
AugmentGeometry from_format(const FieldGeometry& g) {
  AugmentGeometry f;
  f.kind = g.kind;
  f.xyxy = g.xyxy;
  f.edges = g.edges;
  f.matrix = g.kind != GeometryKind::Camera || g.layout == "K";
  if (g.kind == GeometryKind::AxisAngle) {
    f.layout = g.layout;
    f.joints = g.joints;
    f.pairs = g.pairs;
    f.partner = g.partner;
  }
  return f;
}

}  // namespace

DeclaredFields declared_geometry(const Dataset& ds) {
  DeclaredFields out;
  for (const FieldSpec& f : ds.fields())
    if (f.geometry) out.fields.emplace(f.name, from_format(*f.geometry));
  // A geometry of a kind this version does not know (a later one's): the format ignores it,
  // but an augmentation cannot move what it does not know: recorded, for the loader to refuse.
  const auto& meta = ds.metadata();
  if (const auto it = meta.find(format::kMetaSchema); it != meta.end()) {
    const json schema = json::parse(it->second, nullptr, false);
    if (schema.is_object())
      for (const auto& item : schema.items())
        if (item.value().is_object() && item.value().contains("geometry") &&
            !out.fields.contains(item.key()))
          out.unknown.emplace(item.key(), item.value()["geometry"].dump());
  }
  const format::DeclaredGeometry old = format::declared_geometry(std::filesystem::path(ds.path()));
  out.manifest_box_edges = old.box_edges;
  // Datasets written before the schema key: the manifest's --points and --boxes.
  for (const std::string& p : old.points) out.fields.try_emplace(p, AugmentGeometry{});
  for (const std::string& spec : old.boxes) {
    std::string name = spec;
    bool xyxy = false;
    for (const char* suffix : {":xywh", ":xyxy"})
      if (spec.size() > 5 && spec.ends_with(suffix)) {
        name = spec.substr(0, spec.size() - 5);
        xyxy = suffix[3] == 'x';
      }
    AugmentGeometry b;
    b.kind = AugmentGeometry::Kind::Boxes;
    b.xyxy = xyxy;
    b.edges = old.box_edges;
    out.fields.try_emplace(name, b);
  }
  return out;
}

}  // namespace tarmac
