// COCO tables (person_keypoints_train2017.json and the like): rows are annotations[] in file
// order, joined to images[] by image_id. A keypoints file is ~240 MB of JSON for 250k
// annotations, so the document is never held as one DOM: nlohmann's SAX interface hands us
// each element of images[] and annotations[] as a small DOM, which goes into typed columns and
// is dropped (docs/performance.md has the figures).
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "labels/json_labels.h"
#include "table/table_formats.h"
#include "table/table_internal.h"

namespace tarmac {

namespace {

using Json = nlohmann::ordered_json;
using detail::ColumnBuilder;
constexpr int kMaxDepth = 64;

std::string nlohmann_reason(const std::exception& e) {
  std::string what = e.what();
  const size_t cut = what.find("] ");  // drop the "[json.exception.parse_error.101] " tag
  return cut == std::string::npos ? what : what.substr(cut + 2);
}

std::string keys_of(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& item : object.items()) keys.push_back(item.key());
  return detail::quoted_list(keys);
}

struct Image {
  std::string path;
  int64_t id = 0;
  std::optional<int64_t> width, height;
};

// Which top-level value the parser is in.
enum class Section { None, Images, Annotations, Keep, Skip };

class CocoReader {
 public:
  CocoReader(const std::string& path, const TableOptions& options)
      : path_(path),
        image_key_(options.image_column.empty() ? "file_name" : options.image_column),
        max_value_(options.max_cell_bytes) {}

  // --- nlohmann SAX interface ---
  bool null() { return direct_ ? direct_scalar("null", 0) : value(Json(nullptr)); }
  bool boolean(bool b) {
    return direct_ ? direct_scalar(b ? "true" : "false", b ? 1 : 0) : value(Json(b));
  }
  bool number_integer(int64_t n) {
    return direct_ ? direct_scalar(std::to_string(n), static_cast<double>(n), true)
                   : value(Json(n));
  }
  bool number_unsigned(uint64_t n) {
    return direct_ ? direct_scalar(std::to_string(n), static_cast<double>(n), true)
                   : value(Json(n));
  }
  bool number_float(double d, const std::string& token) {
    if (!std::isfinite(d)) fail("it holds a number too large for a double");
    return direct_ ? direct_scalar(token, d, true) : value(Json(d));
  }
  bool string(std::string& s) {
    if (s.size() > max_value_) too_large(s.size(), "");
    return direct_ ? direct_scalar(Json(s).dump(), 0) : value(Json(std::move(s)));
  }
  bool binary(nlohmann::json::binary_t&) { return fail("it holds binary data"); }
  bool start_object(size_t) { return direct_ ? direct_open('{') : open(Json::object()); }
  bool start_array(size_t) { return direct_ ? direct_open('[') : open(Json::array()); }
  bool end_object() { return direct_ ? direct_close('}') : close(); }
  bool end_array() { return direct_ ? direct_close(']') : close(); }
  bool key(std::string& k) {
    if (direct_) {
      direct_separator();
      direct_text_ += Json(k).dump();
      direct_text_ += ':';
      after_key_ = true;
      return true;
    }
    if (depth_ == 1) {
      top_key_ = k;
      if (!top_keys_.insert(k).second) fail("its top-level object has the key '" + k + "' twice");
      return true;
    }
    if (!stack_.empty()) {
      Json& object = *stack_.back();
      if (object.contains(k)) fail(where_element() + " has the key '" + k + "' twice");
      pending_key_ = std::move(k);
      // The bulk of a keypoints file: read straight into text or numbers, never a DOM.
      if (depth_ == 3 && section_ == Section::Annotations &&
          (pending_key_ == "segmentation" || pending_key_ == "keypoints" || pending_key_ == "bbox"))
        direct_pending_ = true;
    }
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::json::exception& e) {
    return fail("the JSON is malformed: " + nlohmann_reason(e));
  }

  Table finish();

 private:
  [[noreturn]] bool fail(const std::string& reason) const {
    throw FatalError("table " + path_ + " (COCO): " + reason);
  }
  // A value over --max-label-size (a segmentation, keypoints or bbox, streamed as text and
  // numbers, or any string), refused before it grows further.
  [[noreturn]] void too_large(uint64_t size, const char* at_least) const {
    const std::string where = section_ == Section::Images || section_ == Section::Annotations
                                  ? where_element() + ", key '" + pending_key_ + "'"
                                  : "'" + top_key_ + "'";
    fail(where + ": a value of " + at_least + format_bytes(size) + ", over --max-label-size " +
         format_bytes(max_value_) + "; raise --max-label-size to read it");
  }
  std::string where_element() const {
    return (section_ == Section::Images ? "images[" : "annotations[") +
           std::to_string(element_index_) + "]";
  }

  // --- direct values: segmentation as JSON text (the raw number tokens, no double -> text
  // round trip), keypoints and bbox as flat numbers. A placeholder null holds the key's place
  // in the element, so that a repeated key is still caught.
  struct Direct {
    std::string text;
    std::vector<double> numbers;
    bool flat = true;  // only numbers, in one array
  };

  void direct_separator() {
    if (after_key_) {
      after_key_ = false;
    } else if (!direct_levels_.empty()) {
      if (!direct_levels_.back()) direct_text_ += ',';
      direct_levels_.back() = false;
    }
  }
  bool direct_scalar(const std::string& token, double number, bool is_number = false) {
    direct_separator();
    direct_text_ += token;
    if (direct_text_.size() > max_value_) too_large(direct_text_.size(), "at least ");
    if (!is_number || direct_levels_.size() != 1) direct_flat_ = false;
    direct_numbers_.push_back(number);
    return true;
  }
  bool direct_open(char bracket) {
    if (++depth_ > kMaxDepth) fail("it is nested deeper than 64 levels");
    direct_separator();
    direct_text_ += bracket;
    direct_levels_.push_back(true);
    if (bracket != '[' || direct_levels_.size() > 1) direct_flat_ = false;
    return true;
  }
  bool direct_close(char bracket) {
    --depth_;
    direct_text_ += bracket;
    direct_levels_.pop_back();
    if (direct_levels_.empty()) {
      Direct& d = direct_values_[pending_key_];
      d.text = std::move(direct_text_);
      d.numbers = std::move(direct_numbers_);
      d.flat = direct_flat_;
      direct_text_.clear();
      direct_numbers_.clear();
      direct_ = false;
      insert(Json(nullptr));
    }
    return true;
  }

  // Where a value at the current depth goes: into the element being built, or it starts one.
  bool value(Json v) {
    if (depth_ == 0) fail("it is not a JSON object");
    if (depth_ == 1) {  // a scalar top-level member
      if (top_key_ == "images" || top_key_ == "annotations")
        fail("'" + top_key_ + "' is not an array");
      if (top_key_ == "info")
        metadata_["coco_info"] = std::move(v);
      else
        ignore_top(top_key_);
      return true;
    }
    if (stack_.empty()) {  // a scalar element of images[] or annotations[]
      if (section_ == Section::Images || section_ == Section::Annotations)
        fail(where_element() + " is not an object");
      return true;  // inside a skipped section: nothing is kept
    }
    direct_pending_ = false;  // a scalar value of a direct key goes into the DOM
    insert(std::move(v));
    return true;
  }

  void insert(Json v) {
    Json& parent = *stack_.back();
    if (parent.is_array())
      parent.push_back(std::move(v));
    else
      parent[pending_key_] = std::move(v);
  }

  bool open(Json container) {
    if (direct_pending_) {  // the value of a direct key is a container: stream it
      direct_pending_ = false;
      direct_ = true;
      direct_flat_ = true;
      return direct_open(container.is_array() ? '[' : '{');
    }
    if (++depth_ > kMaxDepth) fail("it is nested deeper than 64 levels");
    if (depth_ == 1) {
      if (!container.is_object()) fail("it is not a JSON object");
      return true;
    }
    if (depth_ == 2) {  // a top-level member's value
      section_ = top_key_ == "images"                             ? Section::Images
                 : top_key_ == "annotations"                      ? Section::Annotations
                 : top_key_ == "categories" || top_key_ == "info" ? Section::Keep
                                                                  : Section::Skip;
      if ((section_ == Section::Images || section_ == Section::Annotations) &&
          !container.is_array())
        fail("'" + top_key_ + "' is not an array");
      element_index_ = 0;
      if (section_ == Section::Keep) {
        root_ = std::move(container);
        stack_.push_back(&root_);
      } else if (section_ == Section::Skip) {
        ignore_top(top_key_);
      }
      return true;
    }
    if (depth_ == 3 && (section_ == Section::Images || section_ == Section::Annotations)) {
      if (!container.is_object()) fail(where_element() + " is not an object");
      root_ = std::move(container);
      stack_.push_back(&root_);
      return true;
    }
    if (stack_.empty()) return true;  // a skipped section
    insert(std::move(container));
    Json& parent = *stack_.back();
    stack_.push_back(parent.is_array() ? &parent.back() : &parent[pending_key_]);
    return true;
  }

  bool close() {
    if (!stack_.empty()) stack_.pop_back();
    if (depth_ == 3 && (section_ == Section::Images || section_ == Section::Annotations)) {
      if (section_ == Section::Images)
        add_image(root_);
      else
        add_annotation(root_);
      ++element_index_;
    } else if (depth_ == 2 && section_ == Section::Keep) {
      metadata_[top_key_ == "info" ? "coco_info" : top_key_] = std::move(root_);
    }
    if (depth_ == 2) {
      if (section_ == Section::Images) have_images_ = true;
      if (section_ == Section::Annotations) have_annotations_ = true;
      section_ = Section::None;
    }
    --depth_;
    return true;
  }

  void ignore_top(const std::string& key) {
    ignored_.push_back({"'" + key + "': a COCO top-level member tarmac does not read", false});
  }

  void add_image(const Json& image);
  void add_annotation(const Json& annotation);
  int64_t integer(const Json& v, const char* key) const;
  ColumnBuilder& builder(const std::string& name);
  void add_fixed(const std::string& name, const Json& v, const char* what, size_t multiple,
                 size_t exact);

  std::string path_;
  std::string image_key_;
  uint64_t max_value_;
  int depth_ = 0;
  Section section_ = Section::None;
  std::string top_key_;
  std::unordered_set<std::string> top_keys_;
  std::string pending_key_;
  Json root_;
  std::vector<Json*> stack_;
  uint64_t element_index_ = 0;
  bool have_images_ = false, have_annotations_ = false;
  bool direct_pending_ = false, direct_ = false, direct_flat_ = true, after_key_ = false;
  std::string direct_text_;
  std::vector<double> direct_numbers_;
  std::vector<bool> direct_levels_;
  std::unordered_map<std::string, Direct> direct_values_;

  std::vector<Image> images_;
  std::unordered_map<int64_t, uint32_t> image_by_id_;
  std::vector<int64_t> image_ids_;  // per annotation
  std::vector<ColumnBuilder> columns_;
  std::unordered_map<std::string, size_t> column_index_;
  uint64_t rows_ = 0;
  Json metadata_ = Json::object();
  std::vector<Table::Ignored> ignored_;
};

int64_t CocoReader::integer(const Json& v, const char* key) const {
  if (v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX))
    return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  fail(where_element() + ": '" + key + "' is " + v.dump() + ", not an integer");
}

void CocoReader::add_image(const Json& image) {
  const auto id = image.find("id");
  if (id == image.end()) fail(where_element() + " has no 'id'");
  Image out;
  out.id = integer(*id, "id");
  const auto file = image.find(image_key_);
  if (file == image.end())
    fail(where_element() + " (id " + std::to_string(out.id) + ") has no '" + image_key_ +
         "'; its keys are " + keys_of(image) +
         " (name the key holding the image's path with --table-image)");
  if (!file->is_string() || file->get_ref<const std::string&>().empty())
    fail(where_element() + " (id " + std::to_string(out.id) + "): '" + image_key_ + "' is " +
         file->dump() + ", not an image path");
  out.path = file->get<std::string>();
  for (auto [key, slot] : {std::pair{"width", &out.width}, std::pair{"height", &out.height}}) {
    const auto it = image.find(key);
    if (it != image.end() && !it->is_null()) *slot = integer(*it, key);
  }
  if (!image_by_id_.emplace(out.id, static_cast<uint32_t>(images_.size())).second)
    fail(where_element() + ": the image id " + std::to_string(out.id) + " is taken twice");
  images_.push_back(std::move(out));
}

ColumnBuilder& CocoReader::builder(const std::string& name) {
  auto [it, added] = column_index_.try_emplace(name, columns_.size());
  if (added) {
    columns_.emplace_back(name);
    columns_.back().pad_to(rows_);
  }
  return columns_[it->second];
}

// A flat array of numbers, as F64 of shape {n} (multiple 1) or {n / m, m}.
void CocoReader::add_fixed(const std::string& name, const Json& v, const char* what,
                           size_t multiple, size_t exact) {
  ColumnBuilder& column = builder(name);
  const auto direct = direct_values_.find(name);
  if (direct == direct_values_.end()) {
    if (!v.is_null()) fail(where_element() + ": '" + name + "' is " + v.dump() + ", not " + what);
    column.add(detail::null_value());
    return;
  }
  const std::vector<double>& values = direct->second.numbers;
  if (!direct->second.flat || values.size() % multiple != 0 ||
      (exact != 0 && values.size() != exact))
    fail(where_element() + ": '" + name + "' is not " + what);
  std::vector<int64_t> shape = {static_cast<int64_t>(values.size())};
  if (multiple > 1)
    shape = {static_cast<int64_t>(values.size() / multiple), static_cast<int64_t>(multiple)};
  column.add_numeric(DType::F64, shape, values.data(), values.size() * sizeof(double));
}

void CocoReader::add_annotation(const Json& annotation) {
  const auto image_id = annotation.find("image_id");
  if (image_id == annotation.end()) fail(where_element() + " has no 'image_id'");
  image_ids_.push_back(integer(*image_id, "image_id"));
  Json others = Json::object();
  for (const auto& [key, v] : annotation.items()) {
    if (key == "bbox") {
      add_fixed(key, v, "4 numbers [x, y, width, height]", 1, 4);
    } else if (key == "keypoints") {
      add_fixed(key, v, "a flat list of (x, y, visibility) triples", 3, 0);
    } else if (key == "id" || key == "image_id" || key == "category_id" || key == "iscrowd" ||
               key == "num_keypoints") {
      if (v.is_null()) {
        builder(key).add(detail::null_value());
      } else {
        const int64_t n = integer(v, key.c_str());
        builder(key).add_numeric(DType::I64, {}, &n, sizeof n);
      }
    } else if (key == "area") {
      if (v.is_null()) {
        builder(key).add(detail::null_value());
      } else {
        if (!v.is_number()) fail(where_element() + ": 'area' is " + v.dump() + ", not a number");
        const double a = v.get<double>();
        builder(key).add_numeric(DType::F64, {}, &a, sizeof a);
      }
    } else if (key == "segmentation") {
      // Polygons in one annotation, RLE in another: no one column type, so JSON text.
      const auto direct = direct_values_.find(key);
      if (direct == direct_values_.end() && v.is_null()) {
        builder(key).add(detail::null_value());
      } else {
        FieldValue text =
            detail::string_value(direct == direct_values_.end() ? v.dump() : direct->second.text);
        text.kind = FieldKind::Json;
        builder(key).add(std::move(text));
      }
    } else {
      others[key] = v;
    }
  }
  if (!others.empty()) {
    // Typed (and nested objects flattened) as a per-sample .json member would be.
    const std::string text = others.dump();
    Fields fields;
    try {
      fields =
          parse_json_labels({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, "", "");
    } catch (const ParseError& e) {
      fail(where_element() + ": " + e.what());
    }
    for (auto& [name, value] : fields) {
      if (name == "image.width" || name == "image.height" || name == "image.id")
        fail(where_element() + ": the key '" + name + "' clashes with the joined image's column");
      builder(name).add(std::move(value));
    }
  }
  direct_values_.clear();
  ++rows_;
  for (ColumnBuilder& column : columns_) column.pad_to(rows_);
}

Table CocoReader::finish() {
  if (!have_images_) fail("it has no 'images' array");
  if (!have_annotations_) fail("it has no 'annotations' array");
  Table table;
  table.rows = rows_;
  table.member_columns = {"image"};
  table.member_paths.emplace_back();
  std::vector<std::string>& paths = table.member_paths.back();
  paths.reserve(rows_);
  ColumnBuilder width("image.width"), height("image.height"), id("image.id");
  for (uint64_t r = 0; r < rows_; ++r) {
    const auto it = image_by_id_.find(image_ids_[r]);
    if (it == image_by_id_.end())
      fail("annotations[" + std::to_string(r) + "] has the image_id " +
           std::to_string(image_ids_[r]) + ", which no entry of images[] has");
    const Image& image = images_[it->second];
    paths.push_back(image.path);
    for (auto [column, v] : {std::pair{&width, image.width}, std::pair{&height, image.height}}) {
      if (v)
        column->add_numeric(DType::I64, {}, &*v, sizeof *v);
      else
        column->add(detail::null_value());
    }
    id.add_numeric(DType::I64, {}, &image.id, sizeof image.id);
  }
  for (ColumnBuilder& column : columns_) table.columns.push_back(std::move(column).finish());
  for (ColumnBuilder* column : {&width, &height, &id})
    table.columns.push_back(std::move(*column).finish());
  table.metadata = std::move(metadata_);
  table.ignored = std::move(ignored_);
  return table;
}

}  // namespace

Table load_coco_table(const std::string& path, std::span<const uint8_t> bytes,
                      const TableOptions& options) {
  CocoReader reader(path, options);
  try {
    nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &reader);
  } catch (const nlohmann::json::exception& e) {
    throw FatalError("table " + path + " (COCO): the JSON is malformed: " + nlohmann_reason(e));
  }
  return reader.finish();
}

}  // namespace tarmac
