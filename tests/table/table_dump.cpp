// Test tool: prints what the npz table reader or the restricted unpickler makes of a file, as
// JSON, for test_humandata.py to check against numpy. `table_dump npz FILE [IMAGE_COLUMN]`,
// `table_dump pickle FILE`. A refused input: the message on stderr, exit status 1.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "labels/pickle.h"
#include "table/table_formats.h"

namespace {

using Json = nlohmann::ordered_json;

std::string hex(const void* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

Json pickle_json(const tarmac::PickleValue& v) {
  using T = tarmac::PickleValue::Type;
  switch (v.type) {
    case T::None:
      return nullptr;
    case T::Bool:
      return v.boolean;
    case T::Int:
      return v.integer;
    case T::Float:
      return Json{{"float", hex(&v.real, 8)}};
    case T::Str:
      return v.text;
    case T::Bytes:
      return Json{{"bytes", hex(v.text.data(), v.text.size())}};
    case T::List:
    case T::Tuple: {
      Json items = Json::array();
      for (const auto& item : v.items) items.push_back(pickle_json(item));
      return Json{{v.type == T::List ? "list" : "tuple", items}};
    }
    case T::Dict: {
      Json items = Json::array();
      for (size_t k = 0; k < v.keys.size(); ++k)
        items.push_back(Json::array({pickle_json(v.keys[k]), pickle_json(v.items[k])}));
      return Json{{"dict", items}};
    }
    case T::Array: {
      Json a{{"ndarray", v.text}, {"shape", v.shape}};
      if (v.text == "|O") {
        Json items = Json::array();
        for (const auto& item : v.items) items.push_back(pickle_json(item));
        a["items"] = items;
      } else {
        a["hex"] = hex(v.data.data(), v.data.size());
      }
      return a;
    }
  }
  return nullptr;
}

Json ignored_reasons(const tarmac::Table& t) {
  Json out = Json::array();
  for (const auto& i : t.ignored) out.push_back(i.reason);
  return out;
}

Json table_json(const tarmac::Table& t) {
  Json out{{"rows", t.rows},
           {"member_columns", t.member_columns},
           {"member_paths", t.member_paths},
           {"metadata", t.metadata},
           {"ignored", ignored_reasons(t)},
           {"crc32", t.crc32},
           {"bytes", t.bytes}};
  Json columns = Json::array();
  for (const tarmac::TableColumn& c : t.columns) {
    Json col{{"name", c.name}, {"uniform", c.uniform}};
    if (c.uniform) {
      col["dtype"] = std::string(tarmac::dtype_name(c.dtype));
      col["row_shape"] = c.row_shape;
      col["hex"] = hex(c.data.data(), c.data.size());
    } else {
      Json values = Json::array();
      for (const tarmac::FieldValue& v : c.values) {
        if (v.null) {
          values.push_back(nullptr);
          continue;
        }
        const std::string text(v.data.begin(), v.data.end());
        values.push_back(Json{{v.kind == tarmac::FieldKind::String ? "string" : "json", text}});
      }
      col["values"] = values;
    }
    columns.push_back(col);
  }
  out["columns"] = columns;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: table_dump npz|pickle FILE [IMAGE_COLUMN]\n";
    return 2;
  }
  const std::string mode = argv[1], path = argv[2];
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                   std::istreambuf_iterator<char>());
  try {
    if (mode == "pickle") {
      std::cout << pickle_json(tarmac::unpickle(bytes)).dump() << "\n";
    } else {
      tarmac::TableOptions o;
      o.format = tarmac::TableFormat::Npz;
      if (argc > 3) o.image_column = argv[3];
      std::cout << table_json(tarmac::load_npz_table(path, bytes, o)).dump() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
