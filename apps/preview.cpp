// tarmac preview: a contact sheet of a dataset's samples (images, keys, points, boxes, dense
// maps) as one PNG, to see that labels still sit where they belong after the transform.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/errors.h"
#include "apps/flag_values.h"
#include "common/error.h"
#include "preview/contact_sheet.h"
#include "write/file_util.h"

namespace tarmac::cli {

Runner setup_preview(CLI::App& app, const GlobalFlags& g) {
  struct Flags {
    preview::SheetOptions o;
    std::string output, keys, skeleton;
  };
  auto f = std::make_shared<Flags>();
  app.add_option("dataset", f->o.dir, "Dataset directory")->required();
  app.add_option("-o,--output", f->output, "The sheet to write: .png (or .jpg)")->required();
  app.add_option("--n", f->o.n, "How many samples, chosen by --seed (all when fewer)")
      ->transform(integer_in({1, 100000}))
      ->default_val(16);
  app.add_option("--keys", f->keys, "These samples instead, comma-separated, in this order");
  app.add_option("--seed", f->o.seed, "Which samples --n picks (same seed, same sheet)")
      ->transform(unsigned_integer())
      ->default_val(0);
  app.add_option("--tile-height", f->o.tile_height, "Height of every image on the sheet, pixels")
      ->transform(integer_in({16, 4096}))
      ->default_val(256);
  auto* points =
      app.add_option("--points", f->o.points,
                     "Fields to draw as dots (default: convert's --points; none: no dots)");
  auto* boxes = app.add_option("--boxes", f->o.boxes,
                               "Fields to draw as rectangles from their first 4 columns, NAME "
                               "or NAME:xyxy (default: convert's --boxes; none: no rectangles)");
  app.add_option("--skeleton", f->skeleton,
                 "Lines between joints of --points: 1-based pairs A-B,C-D (COCO's "
                 "categories[].skeleton), or coco");
  app.footer(
      "Examples:\n  tarmac preview out/ -o sheet.png\n  tarmac preview out/ -o sheet.png --keys "
      "a/000001,a/000002 --skeleton coco");
  return [f, points, boxes, &g]() -> int {
    preview::SheetOptions o = f->o;
    o.points_given = points->count() > 0;
    o.boxes_given = boxes->count() > 0;
    for (size_t at = 0; !f->keys.empty() && at <= f->keys.size();) {
      const size_t comma = std::min(f->keys.find(',', at), f->keys.size());
      if (comma > at) o.keys.push_back(f->keys.substr(at, comma - at));
      at = comma + 1;
    }
    if (!f->skeleton.empty()) o.skeleton = preview::parse_skeleton(f->skeleton);
    const std::string ext = f->output.substr(std::min(f->output.rfind('.'), f->output.size()));
    const bool jpeg = ext == ".jpg" || ext == ".jpeg";
    if (!jpeg && ext != ".png")
      throw ArgumentError("-o '" + f->output + "': the sheet is written as .png or .jpg");
    const preview::Sheet s = preview::draw_contact_sheet(o, jpeg);
    write_file_atomic(f->output, {reinterpret_cast<const char*>(s.png.data()), s.png.size()});
    if (g.json) {
      nlohmann::ordered_json j = {{"output", f->output}, {"width", s.width},   {"height", s.height},
                                  {"keys", s.keys},      {"points", s.points}, {"boxes", s.boxes},
                                  {"dense", s.dense}};
      print_json(j);
    } else if (g.verbosity >= 0) {
      std::printf("%s: %zu sample(s), %dx%d", f->output.c_str(), s.keys.size(), s.width, s.height);
      if (!s.points.empty()) std::printf(", points: %zu field(s)", s.points.size());
      if (!s.boxes.empty()) std::printf(", boxes: %zu field(s)", s.boxes.size());
      if (!s.dense.empty()) std::printf(", dense maps: %zu", s.dense.size());
      std::printf("\n");
    }
    return kOk;
  };
}

}  // namespace tarmac::cli
