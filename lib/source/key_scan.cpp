#include "source/key_scan.h"

namespace tarmac {

KeySet scan_kept_keys(InputReader& reader, OnDuplicate keep, uint32_t first_input, KeyRule rule,
                      const std::function<void()>& on_member) {
  KeySet kept;
  InputCallbacks cb;
  cb.on_member = [&](uint32_t input, Member&& m) {
    if (on_member) on_member();
    std::string key, ext;
    if (is_hidden_or_metadata(m.name) || !split_member_name(m.name, key, ext, rule)) return;
    if (keep == OnDuplicate::Last)
      kept.assign(key, first_input + input);
    else
      kept.insert(key, first_input + input);
  };
  cb.on_notice = [](MemberNotice&&) {};  // the conversion reports them
  cb.on_input_end = [](uint32_t) {};
  reader.run_names_only(cb);
  return kept;
}

}  // namespace tarmac
