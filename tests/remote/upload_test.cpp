#include <catch2/catch.hpp>

#include <string>

#include "common/error.h"
#include "convert/convert.h"
#include "remote/upload.h"

using namespace tarmac::remote;

TEST_CASE("an s3:// destination is a prefix, with or without its slash", "[remote][upload]") {
  const S3Prefix a = parse_s3_prefix("s3://bucket/sets/coco");
  CHECK(a.bucket == "bucket");
  CHECK(a.prefix == "sets/coco/");
  CHECK(a.url("manifest.json") == "s3://bucket/sets/coco/manifest.json");
  CHECK(parse_s3_prefix("s3://bucket/sets/coco/").prefix == "sets/coco/");
  CHECK(parse_s3_prefix("s3://bucket").prefix == "");
  CHECK(parse_s3_prefix("s3://bucket/").url("x.tar") == "s3://bucket/x.tar");
  CHECK_THROWS_AS(parse_s3_prefix("s3://bucket//x"), tarmac::ParseError);
  CHECK_THROWS_AS(parse_s3_prefix("s3:///x"), tarmac::ParseError);
  CHECK_THROWS_AS(parse_s3_prefix("/local/dir"), tarmac::ParseError);
}

TEST_CASE("the default checkpoint folder is one per bucket and prefix", "[remote][upload]") {
  const std::string a = tarmac::remote_checkpoint_dir("s3://b/sets/coco/", "");
  CHECK(a.starts_with(".tarmac-checkpoint/b/"));
  CHECK(a.size() == std::string(".tarmac-checkpoint/b/").size() + 8);  // 8 hex digits
  // with or without the slash: the same prefix, the same folder (--resume finds it)
  CHECK(tarmac::remote_checkpoint_dir("s3://b/sets/coco", "") == a);
  CHECK(tarmac::remote_checkpoint_dir("s3://b/sets/other/", "") != a);
  CHECK(
      tarmac::remote_checkpoint_dir("s3://c/sets/coco/", "").starts_with(".tarmac-checkpoint/c/"));
  CHECK(tarmac::remote_checkpoint_dir("s3://b/sets/coco/", "/scratch/cp") == "/scratch/cp");
}
