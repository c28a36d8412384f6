#pragma once
// Names of remote inputs: s3://bucket/key, http(s)://..., brace ranges as WebDataset writes
// them, and the HTTP URLs s3:// names map to (path-style: endpoint/bucket/key).
#include <string>
#include <string_view>
#include <vector>

namespace tarmac::remote {

/// True for the names read over the network: s3://, http:// and https://.
bool is_remote(std::string_view name);
bool is_s3(std::string_view name);

/// Expands every {A..B} (integers; zero-padded to A's width when A has leading zeros) and
/// {x,y,z} in `pattern`, left to right, into the names in order. Throws ParseError for an
/// unclosed brace, a range whose ends are not integers, or more than `limit` names.
std::vector<std::string> expand_braces(const std::string& pattern, size_t limit = 1000000);

struct S3Location {
  std::string bucket;
  std::string key;  ///< "" for the bucket itself; ends with '/' for a prefix
};

/// "s3://bucket/key" -> {bucket, key}; throws ParseError naming what is wrong.
S3Location parse_s3(const std::string& url);

/// Percent-encodes all but RFC 3986's unreserved characters (and '/' unless encode_slash), as
/// AWS's signature version 4 asks of paths and query values.
std::string uri_encode(std::string_view s, bool encode_slash);

/// The path-style HTTP URL of an object: ENDPOINT/bucket/key (key percent-encoded).
std::string s3_object_url(const std::string& endpoint, const S3Location& loc);

}  // namespace tarmac::remote
