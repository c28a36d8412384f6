// tarmac ls: the samples of a dataset, one key per line (-l: index, size, width x height).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/errors.h"
#include "check/annotation.h"
#include "check/dataset_source.h"
#include "common/error.h"
#include "common/printable.h"

namespace tarmac::cli {

Runner setup_ls(CLI::App& app, const GlobalFlags& g) {
  auto dir = std::make_shared<std::string>();
  auto long_format = std::make_shared<bool>(false);
  app.add_option("dataset", *dir, "Dataset directory, or s3://bucket/prefix/")->required();
  app.add_flag("-l,--long", *long_format, "Also index, image size in bytes and width x height");
  return [dir, long_format, &g]() -> int {
    const check::DatasetSource src(*dir);
    check::Annotation a;
    std::vector<check::Problem> problems;
    if (!a.open(src.dir(), false, problems) || !problems.empty()) {
      const auto& p = problems.front();
      throw FatalError("'" + *dir + "' is not a valid dataset: " + p.file + ": " + p.what);
    }
    const bool images = !a.blob_kinds().empty();
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (uint64_t i = 0; i < a.size(); ++i) {
      // a key may hold any UTF-8: JSON escapes it, a terminal gets it escaped (printable.h)
      const std::string key = g.json ? std::string(a.key(i)) : printable(a.key(i));
      if (g.json) {
        nlohmann::ordered_json j = {{"index", i}, {"key", key}};
        if (images) {
          const check::BlobRef b = a.blob(0, i);
          j["size"] = b.size;
          j["width"] = b.width;
          j["height"] = b.height;
        }
        list.push_back(j);
      } else if (*long_format && images) {
        const check::BlobRef b = a.blob(0, i);
        std::printf("%8llu %10lld %5dx%-5d %s\n", static_cast<unsigned long long>(i),
                    static_cast<long long>(b.size), b.width, b.height, key.c_str());
      } else if (*long_format) {
        std::printf("%8llu %s\n", static_cast<unsigned long long>(i), key.c_str());
      } else {
        std::printf("%s\n", key.c_str());
      }
    }
    if (g.json) print_json(list);
    return kOk;
  };
}

}  // namespace tarmac::cli
