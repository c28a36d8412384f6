// tarmac cat: one sample's stored image or dense map (bytes) or its labels (JSON) on stdout.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "apps/commands.h"
#include "apps/errors.h"
#include "check/inspect.h"
#include "common/error.h"
#include "common/printable.h"

namespace tarmac::cli {

Runner setup_cat(CLI::App& app, const GlobalFlags& g) {
  struct Flags {
    std::string dir, sample, dense;
    bool image = false, labels = false;
  };
  auto f = std::make_shared<Flags>();
  app.add_option("dataset", f->dir, "Dataset directory, or s3://bucket/prefix/")->required();
  app.add_option("sample", f->sample, "Sample key, or #INDEX (0-based)")->required();
  auto* image = app.add_flag("--image", f->image, "The stored image bytes (the default)");
  auto* dense = app.add_option("--dense", f->dense, "The stored dense map NAME (e.g. depth) bytes");
  auto* labels =
      app.add_flag("--labels", f->labels, "The sample's labels, affine and blob places, as JSON");
  image->excludes(dense)->excludes(labels);
  dense->excludes(labels);
  app.footer(
      "Examples:\n  tarmac cat out/ agora/00/frame_000017 > crop.jpg\n  tarmac cat out/ '#0' "
      "--labels\n  tarmac cat s3://bucket/train/ '#0' > first.jpg   (one Range GET of its shard)");
  return [f, &g]() -> int {
    const check::DatasetSource src(f->dir);
    check::Annotation a;
    std::vector<check::Problem> problems;
    if (!a.open(src.dir(), false, problems) || !problems.empty()) {
      const auto& p = problems.front();
      throw FatalError("'" + f->dir + "' is not a valid dataset: " + p.file + ": " + p.what);
    }
    const auto i = a.find(f->sample);
    if (!i)
      throw FatalError("no sample '" + printable(f->sample) + "' in '" + f->dir + "' (" +
                       std::to_string(a.size()) + " samples)");
    if (f->labels || g.json) {
      print_json(check::sample_json(a, *i));
      return kOk;
    }
    const size_t kind = check::blob_kind(a, f->dense.empty() ? "image" : f->dense);
    if (::isatty(STDOUT_FILENO))
      throw FatalError(
          "refusing to write binary image bytes to a terminal; redirect stdout (> file)");
    const std::vector<uint8_t> bytes = check::read_blob(src, a, kind, *i);
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() ||
        std::fflush(stdout) != 0)
      throw FatalError("cannot write to standard output");
    return kOk;
  };
}

}  // namespace tarmac::cli
