#include "source/class_scan.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace tarmac;
namespace fs = std::filesystem;

namespace {

// A directory tree of empty files, removed at the end.
class Tree {
 public:
  explicit Tree(const std::vector<std::string>& files) {
    std::string tmpl = "/tmp/tarmac_class_scan_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
    for (const auto& f : files) {
      fs::create_directories((root_ / f).parent_path());
      std::ofstream(root_ / f) << "x";
    }
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

const std::vector<std::string> kImages = {"jpg", "jpeg", "png"};

}  // namespace

TEST_CASE("parent_folder: the folder directly holding a member") {
  CHECK(parent_folder("train/n01440764/x.JPEG") == "n01440764");
  CHECK(parent_folder("cat/1.jpg") == "cat");
  CHECK(parent_folder("a.b/c.d/img.png") == "c.d");
  CHECK(parent_folder("x.jpg").empty());
  CHECK(parent_folder("/x.jpg").empty());
}

TEST_CASE("scan_class_folders: image folders, sorted by code point as Python sorts str") {
  // Created in an order that is not the sorted one; upper case sorts before lower case, "a10"
  // before "a2", and a non-ASCII name after every ASCII one.
  Tree t({"zebra/1.jpg", "Zebra/2.JPG", "a2/3.png", "a10/4.jpeg", "\xc3\xa9t\xc3\xa9/5.jpg",
          "a2/3.json", "labels_only/6.json", "top.jpg", "zebra/.8.jpg", "n/deep/9.rgb.png"});
  InputReader reader({t.root()}, {});
  const auto classes = scan_class_folders(reader, KeyRule::FirstDot, kImages);
  CHECK(classes ==
        std::vector<std::string>{"Zebra", "a10", "a2", "deep", "zebra", "\xc3\xa9t\xc3\xa9"});
}

TEST_CASE("scan_class_folders: only image extensions count, as --image says") {
  Tree t({"a/1.jpg", "b/2.tif", "c/3.png"});
  InputReader reader({t.root()}, {});
  CHECK(scan_class_folders(reader, KeyRule::FirstDot, {"jpg", "tif"}) ==
        std::vector<std::string>{"a", "b"});
}
