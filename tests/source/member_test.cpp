#include <catch2/catch.hpp>

#include <string>

#include "source/member.h"

using tarmac::split_member_name;
using tarmac::unsafe_name_reason;

namespace {

struct Split {
  bool ok;
  std::string key, ext;
};

Split split(const std::string& name, tarmac::KeyRule rule = tarmac::KeyRule::FirstDot) {
  Split s;
  s.ok = split_member_name(name, s.key, s.ext, rule);
  return s;
}

}  // namespace

TEST_CASE("split_member_name: key is the path up to the first dot of the file name") {
  auto s = split("dir/0001.jpg");
  REQUIRE(s.ok);
  CHECK(s.key == "dir/0001");
  CHECK(s.ext == "jpg");

  s = split("0001.smpl.npz");
  REQUIRE(s.ok);
  CHECK(s.key == "0001");
  CHECK(s.ext == "smpl.npz");

  // Dots in directory names do not count; only the file name's first dot does.
  s = split("a.b/c.d/img.seg.PNG");
  REQUIRE(s.ok);
  CHECK(s.key == "a.b/c.d/img");
  CHECK(s.ext == "seg.png");
}

TEST_CASE("split_member_name: under last-dot the key is the path up to the last dot") {
  using tarmac::KeyRule;
  auto s = split("photos/IMG_2020.01.01.JPG", KeyRule::LastDot);
  REQUIRE(s.ok);
  CHECK(s.key == "photos/IMG_2020.01.01");
  CHECK(s.ext == "jpg");

  s = split("frame.000123.jpg", KeyRule::LastDot);
  REQUIRE(s.ok);
  CHECK(s.key == "frame.000123");
  CHECK(s.ext == "jpg");

  s = split("a.b/0001.jpg", KeyRule::LastDot);  // a directory's dot is never the last
  REQUIRE(s.ok);
  CHECK(s.key == "a.b/0001");

  CHECK_FALSE(split("a.b/README", KeyRule::LastDot).ok);
  CHECK_FALSE(split(".hidden", KeyRule::LastDot).ok);
  CHECK_FALSE(split("dir/.jpg", KeyRule::LastDot).ok);
  CHECK_FALSE(split("frame.000123.", KeyRule::LastDot).ok);
  CHECK(std::string(tarmac::key_rule_name(KeyRule::LastDot)) == "last-dot");
  CHECK(std::string(tarmac::key_rule_name(KeyRule::FirstDot)) == "first-dot");
}

TEST_CASE("is_image_extension: the whole extension or its last part(s)") {
  const std::vector<std::string> exts = {"jpg", "png"};
  CHECK(tarmac::is_image_extension("png", exts));
  CHECK(tarmac::is_image_extension("rgb.png", exts));
  CHECK(tarmac::is_image_extension("000123.jpg", exts));
  CHECK_FALSE(tarmac::is_image_extension("json", exts));
  CHECK_FALSE(tarmac::is_image_extension("xpng", exts));      // not a dot before it
  CHECK_FALSE(tarmac::is_image_extension("png.json", exts));  // only the end counts
  CHECK(tarmac::is_image_extension("left.rgb.png", {"rgb.png"}));
  CHECK_FALSE(tarmac::is_image_extension("depth.png", {"rgb.png"}));
}

TEST_CASE("split_member_name: the extension is lower-cased, the key is not") {
  auto s = split("Dir/Photo_01.JPG");
  REQUIRE(s.ok);
  CHECK(s.key == "Dir/Photo_01");
  CHECK(s.ext == "jpg");

  s = split("X.Json");
  REQUIRE(s.ok);
  CHECK(s.key == "X");
  CHECK(s.ext == "json");
}

TEST_CASE("split_member_name: names without key or extension are refused") {
  CHECK_FALSE(split("README").ok);           // no dot
  CHECK_FALSE(split("dir/README").ok);       // no dot in the file name
  CHECK_FALSE(split("dir.d/README").ok);     // the dot is in the directory only
  CHECK_FALSE(split(".hidden").ok);          // empty key
  CHECK_FALSE(split("dir/.hidden.jpg").ok);  // empty key after the slash
  CHECK_FALSE(split("0001.").ok);            // empty extension
  CHECK_FALSE(split("dir/").ok);
  CHECK_FALSE(split("").ok);
}

TEST_CASE("split_member_name: leaves outputs alone when it refuses") {
  std::string key = "k", ext = "e";
  CHECK_FALSE(split_member_name("noext", key, ext));
  CHECK(key == "k");
  CHECK(ext == "e");
}

TEST_CASE("unsafe_name_reason: safe names give an empty reason") {
  CHECK(unsafe_name_reason("0001.jpg").empty());
  CHECK(unsafe_name_reason("a/b/c.jpg").empty());
  CHECK(unsafe_name_reason("a..b/c...jpg").empty());  // dots inside a component are fine
  CHECK(unsafe_name_reason("..a/b.jpg").empty());
}

TEST_CASE("unsafe_name_reason: absolute, '..', empty and NUL names are unsafe") {
  CHECK(unsafe_name_reason("") == "empty member name");
  CHECK(unsafe_name_reason("/etc/passwd.txt") == "absolute path");
  CHECK(unsafe_name_reason("../x.jpg") == "'..' path component");
  CHECK(unsafe_name_reason("a/../../x.jpg") == "'..' path component");
  CHECK(unsafe_name_reason("a/b/..") == "'..' path component");
  CHECK(unsafe_name_reason("..") == "'..' path component");
  CHECK(unsafe_name_reason(std::string("a\0b.jpg", 7)) == "NUL byte in name");
  // Regression: "a//b.jpg" gave the key "a//b", a second spelling of "a/b".
  CHECK(unsafe_name_reason("a//b.jpg") == "empty path component");
  CHECK(unsafe_name_reason("a/b/") == "empty path component");
}
