#include "format/names.h"

#include <catch2/catch.hpp>

using namespace tarmac::format;

TEST_CASE("shard names: made and recognised; a user's shard-notes.txt is not one") {
  CHECK(shard_name(0) == "shard-000000.tar");
  CHECK(shard_name(42) == "shard-000042.tar");
  CHECK(shard_name(1234567) == "shard-1234567.tar");
  for (size_t k : {0u, 7u, 999999u, 1000000u}) CHECK(is_shard_name(shard_name(k)));
  CHECK_FALSE(is_shard_name("shard-notes.txt"));
  CHECK_FALSE(is_shard_name("shard-00001.tar"));  // five digits: never written
  CHECK_FALSE(is_shard_name("shard-00000a.tar"));
  CHECK_FALSE(is_shard_name("shard-000000.tar.tmp"));
  CHECK_FALSE(is_shard_name("xshard-000000.tar"));
}

TEST_CASE("shard entries of the metadata are plain file names") {
  CHECK(is_valid_shard_entry("shard-000000.tar"));
  CHECK(is_valid_shard_entry("anything.tar"));
  CHECK_FALSE(is_valid_shard_entry(""));
  CHECK_FALSE(is_valid_shard_entry("../x.tar"));
  CHECK_FALSE(is_valid_shard_entry("d/x.tar"));
  CHECK_FALSE(is_valid_shard_entry(".hidden.tar"));
  CHECK_FALSE(is_valid_shard_entry(std::string("a\0b", 3)));
}

TEST_CASE("tensor names and dense blob kinds") {
  CHECK(blob_tensor(kImageBlob, kBlobShard) == "__image__.shard");
  CHECK(blob_tensor("__depth__", kBlobHeight) == "__depth__.height");
  CHECK(values_tensor("pts") == "pts.values");
  CHECK(offsets_tensor(kKeyColumn) == "__key__.offsets");
  CHECK(dense_blob_kind("depth.png") == "__depth__");
  CHECK(dense_blob_kind("seg.mask.png") == "__seg.mask__");
  CHECK(dense_blob_kind("depth") == "__depth__");
}

TEST_CASE("stored encodings by name, both ways") {
  for (auto e : {StoredEncoding::Jpeg, StoredEncoding::Png, StoredEncoding::Webp,
                 StoredEncoding::Raw, StoredEncoding::Source})
    CHECK(encoding_from_name(encoding_name(e)) == e);
  CHECK(encoding_name(StoredEncoding::Raw) == "rgb");
  CHECK_FALSE(encoding_from_name("jpeg"));
  CHECK_FALSE(encoding_from_name(""));
}
