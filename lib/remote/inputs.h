#pragma once
// Remote input names made into the objects a run reads: brace ranges expanded, an s3://
// prefix listed (every object under it, sorted by key), and every object checked to exist
// before anything is written.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/remote_config.h"

namespace tarmac::remote {

/// One page of a ListObjectsV2 answer.
struct ListPage {
  std::vector<std::pair<std::string, uint64_t>> objects;  ///< key, size
  bool truncated = false;
  std::string next_token;
};

/// Parses a ListObjectsV2 answer (XML); throws ParseError when it is not one.
ListPage parse_list_page(std::string_view xml);

/// The objects under `prefix_url` ("s3://bucket/prefix/", or "s3://bucket/" for all), as
/// s3:// names with their sizes, sorted by key; keys ending in '/' (folder markers) left out.
std::vector<std::pair<std::string, uint64_t>> list_objects(const std::string& prefix_url,
                                                           const RemoteConfig& config);

/// `inputs` with every remote name expanded (braces, s3:// prefixes) and checked (HEAD, or
/// the listing): local names are kept as given. Throws RemoteError with one line for a
/// missing object, bucket or credentials, an empty prefix, or an endpoint that does not answer.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                       const RemoteConfig& config);

/// The size expand_inputs() learnt of a remote object, if any (for progress).
std::optional<uint64_t> known_size(const std::string& name);

}  // namespace tarmac::remote
