#include "format/json_keys.h"

#include <nlohmann/json.hpp>
#include <set>

namespace tarmac::format {
namespace {

using json = nlohmann::json;

// nlohmann's SAX interface: values are ignored, containers and keys tracked.
class KeyScan : public nlohmann::json_sax<json> {
 public:
  KeyScan(JsonKeys& out, int max_depth) : out_(out), max_depth_(max_depth) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    objects_.emplace_back();
    return open();
  }
  bool key(string_t& k) override {
    if (!objects_.back().insert(k).second) {
      out_.duplicate = k;
      out_.duplicate_at_top = objects_.size() == 1 && depth_ == 1;
      return false;
    }
    if (objects_.size() == 1 && depth_ == 1) out_.top_keys.push_back(k);
    return true;
  }
  bool end_object() override {
    objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    out_.valid = false;
    out_.error = e.what();
    return false;
  }

 private:
  bool open() {
    if (++depth_ > max_depth_) {
      out_.too_deep = true;
      return false;
    }
    return true;
  }

  JsonKeys& out_;
  int max_depth_;
  int depth_ = 0;
  std::vector<std::set<std::string>> objects_;  // the keys of each open object
};

}  // namespace

JsonKeys scan_json_keys(std::string_view text, int max_depth) {
  JsonKeys out;
  KeyScan scan(out, max_depth);
  json::sax_parse(text.begin(), text.end(), &scan);
  return out;
}

}  // namespace tarmac::format
