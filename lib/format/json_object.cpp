#include "format/json_object.h"

#include <iterator>
#include <unordered_map>
#include <vector>

namespace tarmac::format {
namespace {

using ojson = nlohmann::ordered_json;

// A SAX handler building the document as nlohmann's own does, except that each open object
// keeps an index of its keys: a new key is appended, a repeated one overwritten in place.
class OrderedBuilder {
 public:
  using number_integer_t = ojson::number_integer_t;
  using number_unsigned_t = ojson::number_unsigned_t;
  using number_float_t = ojson::number_float_t;
  using string_t = ojson::string_t;
  using binary_t = ojson::binary_t;

  explicit OrderedBuilder(bool allow_exceptions) : allow_exceptions_(allow_exceptions) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(number_integer_t v) { return value(v); }
  bool number_unsigned(number_unsigned_t v) { return value(v); }
  bool number_float(number_float_t v, const string_t&) { return value(v); }
  bool string(string_t& v) { return value(std::move(v)); }
  bool binary(binary_t& v) { return value(ojson::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(ojson::object()); }
  bool key(string_t& k) {
    Open& o = open_.back();
    auto& items = static_cast<ojson::object_t::Container&>(o.node->get_ref<ojson::object_t&>());
    const auto [at, added] = o.index.try_emplace(k, items.size());
    if (added) items.emplace_back(std::move(k), nullptr);
    o.slot = &items[at->second].second;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool end_array() { return close(); }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    if (allow_exceptions_) throw e;
    failed_ = true;
    return false;
  }

  ojson result() { return failed_ ? ojson(ojson::value_t::discarded) : std::move(root_); }

 private:
  struct Open {
    ojson* node;
    ojson* slot = nullptr;  // an object's value for the key just read
    std::unordered_map<std::string, std::size_t> index;
  };

  // Where the next value goes: the root, an array's end, or the slot of the key just read.
  ojson* place(ojson v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& o = open_.back();
    if (o.node->is_array()) {
      o.node->get_ref<ojson::array_t&>().push_back(std::move(v));
      return &o.node->get_ref<ojson::array_t&>().back();
    }
    *o.slot = std::move(v);
    return o.slot;
  }
  bool value(ojson v) {
    place(std::move(v));
    return true;
  }
  bool open(ojson container) {
    open_.push_back(Open{place(std::move(container)), nullptr, {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  bool allow_exceptions_;
  bool failed_ = false;
  ojson root_;
  std::vector<Open> open_;  // pointers into root_: stable, as only the innermost grows
};

}  // namespace

ojson parse_ordered(std::string_view text, bool allow_exceptions) {
  OrderedBuilder builder(allow_exceptions);
  ojson::sax_parse(text.begin(), text.end(), &builder);
  return builder.result();
}

ojson parse_ordered(std::istream& in, bool allow_exceptions) {
  const std::string text(std::istreambuf_iterator<char>(in), {});
  return parse_ordered(text, allow_exceptions);
}

}  // namespace tarmac::format
