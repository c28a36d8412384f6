#pragma once
// A dataset in object storage (s3://bucket/prefix/, or an http(s):// folder) read through a
// local cache: the manifest, the annotation file and the shard list are downloaded at open,
// each shard whole on its first use (read/dataset.h ShardFetcher), CRC-checked as it lands
// against the manifest; the Dataset then maps the cached copies as it maps a local folder, so
// no network code runs on the path that reads samples. Not part of libtarmac_reader (no
// libcurl there): the C ABI (tarmac_open_cached) and the Python package use it.
#include <cstdint>
#include <memory>
#include <string>

#include "format/manifest.h"
#include "read/dataset.h"
#include "remote/object_cache.h"

namespace tarmac {

/// A remote dataset's small files in a local folder.
struct RemoteDatasetFiles {
  std::string url;  ///< the dataset's prefix, ending with '/'
  std::string dir;  ///< the local folder holding its files (the cache's copy of the prefix)
  format::Manifest manifest;
};

/// Downloads `url`'s manifest.json (at every call: it says whether the dataset changed), its
/// labels.safetensors and shardlist.json (unless the cached copies have the CRC-32s the
/// manifest records) and its merged derived columns into `cache`. With `check_crcs` false
/// they are downloaded as they are, without the manifest's CRC-32s (`tarmac verify` compares).
/// Throws RemoteError "not a complete dataset" (http_status() 404) when the prefix has no
/// manifest.json, ParseError for a manifest that does not parse, RemoteError for a download
/// whose CRC-32 is not the manifest's and for anything the server refuses.
RemoteDatasetFiles fetch_dataset_files(remote::ObjectCache& cache, const std::string& url,
                                       bool check_crcs = true);

/// Opens the dataset at `url` through the cache in `cache_dir` (created; at most `cache_size`
/// bytes of objects, 0: no limit); shared by processes. Throws as fetch_dataset_files() and
/// Dataset() do; a shard that cannot be fetched throws RemoteError (a FatalError) where it is
/// first read.
Dataset open_cached(const std::string& url, const std::string& cache_dir, uint64_t cache_size,
                    const remote::RemoteConfig& config);

}  // namespace tarmac
