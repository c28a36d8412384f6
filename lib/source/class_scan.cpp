#include "source/class_scan.h"

#include <set>

namespace tarmac {

std::string parent_folder(const std::string& name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0) return "";
  const size_t before = name.rfind('/', slash - 1);
  const size_t begin = before == std::string::npos ? 0 : before + 1;
  return name.substr(begin, slash - begin);
}

std::vector<std::string> scan_class_folders(InputReader& reader, KeyRule rule,
                                            const std::vector<std::string>& image_exts,
                                            const std::function<void()>& on_member) {
  std::set<std::string> folders;  // std::string orders by unsigned byte: code point for UTF-8
  InputCallbacks cb;
  cb.on_member = [&](uint32_t, Member&& m) {
    if (on_member) on_member();
    std::string key, ext;
    if (is_hidden_or_metadata(m.name) || !split_member_name(m.name, key, ext, rule) ||
        !is_image_extension(ext, image_exts))
      return;
    if (std::string folder = parent_folder(m.name); !folder.empty())
      folders.insert(std::move(folder));
  };
  cb.on_notice = [](MemberNotice&&) {};  // the conversion reports them
  cb.on_input_end = [](uint32_t) {};
  reader.run_names_only(cb);
  return {folders.begin(), folders.end()};
}

}  // namespace tarmac
