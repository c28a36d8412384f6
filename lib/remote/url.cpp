#include "remote/url.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/error.h"

namespace tarmac::remote {

bool is_s3(std::string_view name) {
  return name.starts_with("s3://");
}

bool is_remote(std::string_view name) {
  return is_s3(name) || name.starts_with("http://") || name.starts_with("https://");
}

namespace {

// The alternatives of one brace body: "000..009" -> 000, 001, ...; "a,b" -> a, b.
std::vector<std::string> alternatives(const std::string& body, const std::string& pattern) {
  const auto dots = body.find("..");
  if (dots == std::string::npos) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
      const auto comma = body.find(',', start);
      out.push_back(body.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  const std::string a = body.substr(0, dots), b = body.substr(dots + 2);
  auto number = [&](const std::string& s) {
    uint64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
      throw ParseError("'" + pattern + "': brace range {" + body +
                       "} needs two non-negative integers, as in {000000..000099}");
    return v;
  };
  const uint64_t from = number(a), to = number(b);
  if (to < from)
    throw ParseError("'" + pattern + "': brace range {" + body + "} counts down; write {" + b +
                     ".." + a + "}");
  const size_t width = a.size() > 1 && a[0] == '0' ? a.size() : 0;
  std::vector<std::string> out;
  for (uint64_t v = from;; ++v) {
    std::string s = std::to_string(v);
    if (s.size() < width) s.insert(0, width - s.size(), '0');
    out.push_back(std::move(s));
    if (out.size() > 1000000)
      throw ParseError("'" + pattern + "': brace range {" + body + "} names over a million inputs");
    if (v == to) break;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern, size_t limit) {
  const auto open = pattern.find('{');
  if (open == std::string::npos) {
    if (pattern.find('}') != std::string::npos)
      throw ParseError("'" + pattern + "': '}' without '{'");
    return {pattern};
  }
  const auto close = pattern.find('}', open);
  if (close == std::string::npos) throw ParseError("'" + pattern + "': '{' without '}'");
  const std::string head = pattern.substr(0, open);
  const std::vector<std::string> tails = expand_braces(pattern.substr(close + 1), limit);
  std::vector<std::string> out;
  for (const auto& alt : alternatives(pattern.substr(open + 1, close - open - 1), pattern))
    for (const auto& tail : tails) {
      if (out.size() == limit)
        throw ParseError("'" + pattern + "' names more than " + std::to_string(limit) + " inputs");
      out.push_back(head + alt + tail);
    }
  return out;
}

S3Location parse_s3(const std::string& url) {
  if (!is_s3(url)) throw ParseError("'" + url + "' is not an s3:// URL");
  const std::string rest = url.substr(5);
  const auto slash = rest.find('/');
  S3Location loc;
  loc.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) loc.key = rest.substr(slash + 1);
  if (loc.bucket.empty())
    throw ParseError("'" + url + "' names no bucket: write s3://BUCKET/KEY or s3://BUCKET/PREFIX/");
  for (char c : loc.bucket)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
      throw ParseError("'" + url + "': bucket name '" + loc.bucket +
                       "' holds a character S3 bucket names cannot have");
  // S3 takes a key as written, but URL handling on the way (libcurl, proxies, a reader's
  // os.path) would drop '.' and '..' or merge '//', reaching another object than the one
  // named: every s3:// name tarmac reads or writes is refused here, in one place, as `tarmac
  // ls` refuses it. The one empty part allowed is the last: "PREFIX/" names a prefix.
  std::vector<std::string> parts;
  bool odd = false;
  for (size_t b = 0; b < loc.key.size();) {
    const size_t e = std::min(loc.key.find('/', b), loc.key.size());
    const std::string part = loc.key.substr(b, e - b);
    if (part.empty() || part == "." || part == "..") odd = true;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    b = e + 1;
  }
  if (odd) {
    std::string fixed = "s3://" + loc.bucket + "/";
    for (size_t i = 0; i < parts.size(); ++i) fixed += (i ? "/" : "") + parts[i];
    if (!parts.empty() && loc.key.back() == '/') fixed += '/';
    throw ParseError("'" + url +
                     "' has an empty, '.' or '..' part in its key: S3 keys are taken as "
                     "written, so tarmac does not guess which object is meant; name it "
                     "without them (e.g. " +
                     fixed + ")");
  }
  return loc;
}

std::string uri_encode(std::string_view s, bool encode_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (c == '/' && !encode_slash)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string s3_object_url(const std::string& endpoint, const S3Location& loc) {
  return endpoint + "/" + loc.bucket + "/" + uri_encode(loc.key, false);
}

}  // namespace tarmac::remote
