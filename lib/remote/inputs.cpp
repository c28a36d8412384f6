#include "remote/inputs.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "common/error.h"
#include "remote/http.h"
#include "remote/url.h"

namespace tarmac::remote {
namespace {

std::mutex sizes_mutex;
std::map<std::string, uint64_t> sizes;

void remember(const std::string& name, uint64_t size) {
  const std::lock_guard lock(sizes_mutex);
  sizes[name] = size;
}

// The text of the first <tag>...</tag> in [from, to), entities decoded; nullopt when absent.
std::optional<std::string> element(std::string_view xml, std::string_view tag, size_t from = 0,
                                   size_t to = std::string_view::npos) {
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  const auto b = xml.find(open, from);
  if (b == std::string_view::npos || b >= to) return std::nullopt;
  const auto e = xml.find(close, b);
  if (e == std::string_view::npos || e > to)
    throw ParseError("<" + std::string(tag) + "> is not closed");
  std::string_view raw = xml.substr(b + open.size(), e - b - open.size());
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const auto semi = raw.find(';', i);
    if (semi == std::string_view::npos) throw ParseError("an XML entity is not closed");
    const std::string_view ent = raw.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (ent.size() > 1 && ent[0] == '#') {
      const bool hex = ent[1] == 'x';
      const std::string digits(ent.substr(hex ? 2 : 1));
      if (digits.empty() || digits.size() > 6 ||
          digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") !=
              std::string::npos)
        throw ParseError("bad XML character reference &" + std::string(ent) + ";");
      const unsigned long cp = std::stoul(digits, nullptr, hex ? 16 : 10);
      if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        throw ParseError("bad XML character reference &" + std::string(ent) + ";");
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      throw ParseError("unknown XML entity &" + std::string(ent) + ";");
    }
    i = semi;
  }
  return out;
}

}  // namespace

ListPage parse_list_page(std::string_view xml) {
  if (xml.find("<ListBucketResult") == std::string_view::npos)
    throw ParseError("the answer is not a ListBucketResult");
  ListPage page;
  size_t at = 0;
  while (true) {
    const auto b = xml.find("<Contents>", at);
    if (b == std::string_view::npos) break;
    const auto e = xml.find("</Contents>", b);
    if (e == std::string_view::npos) throw ParseError("<Contents> is not closed");
    const auto key = element(xml, "Key", b, e);
    const auto size = element(xml, "Size", b, e);
    if (!key || !size || size->empty() || size->size() > 19 ||
        size->find_first_not_of("0123456789") != std::string::npos)
      throw ParseError("an entry of the listing has no key or no size");
    page.objects.emplace_back(*key, std::stoull(*size));
    at = e;
  }
  page.truncated = element(xml, "IsTruncated").value_or("false") == "true";
  page.next_token = element(xml, "NextContinuationToken").value_or("");
  if (page.truncated && page.next_token.empty())
    throw ParseError("the listing is truncated but gives no continuation token");
  return page;
}

std::vector<std::pair<std::string, uint64_t>> list_objects(const std::string& prefix_url,
                                                           const RemoteConfig& config) {
  const S3Location loc = parse_s3(prefix_url);
  Target bucket = target_for(prefix_url, config);
  bucket.url = config.s3_endpoint() + "/" + loc.bucket;
  std::vector<std::pair<std::string, uint64_t>> out;
  std::string token;
  while (true) {
    // SigV4 signs the query sorted by name, values percent-encoded
    std::string query;
    if (!token.empty()) query += "continuation-token=" + uri_encode(token, true) + "&";
    query += "list-type=2&prefix=" + uri_encode(loc.key, true);
    const Response r = request(bucket, config, false, query);
    ListPage page;
    try {
      page = parse_list_page(r.body);
    } catch (const ParseError& e) {
      throw RemoteError("cannot list '" + prefix_url + "': the server's answer is not a listing (" +
                        e.what() + "): check the endpoint (--endpoint-url or AWS_ENDPOINT_URL)");
    }
    for (auto& [key, size] : page.objects)
      if (!key.ends_with('/')) out.emplace_back("s3://" + loc.bucket + "/" + key, size);
    if (!page.truncated) break;
    token = page.next_token;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                       const RemoteConfig& config) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    if (!is_remote(in)) {
      out.push_back(in);
      continue;
    }
    std::vector<std::string> names;
    try {
      names = expand_braces(in);
    } catch (const ParseError& e) {
      throw RemoteError(e.what());
    }
    for (const auto& name : names) {
      if (is_s3(name) && (parse_s3(name).key.empty() || name.ends_with('/'))) {
        const auto objects = list_objects(name, config);
        if (objects.empty())
          throw RemoteError("'" + name +
                            "' holds no objects: check the bucket and the prefix (aws "
                            "s3 ls " +
                            name + ")");
        for (const auto& [object, size] : objects) {
          remember(object, size);
          out.push_back(object);
        }
        continue;
      }
      const Response r = head_object(target_for(name, config), config);
      if (r.status < 300 && r.content_length) remember(name, *r.content_length);
      out.push_back(name);
    }
  }
  return out;
}

std::optional<uint64_t> known_size(const std::string& name) {
  const std::lock_guard lock(sizes_mutex);
  const auto it = sizes.find(name);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

}  // namespace tarmac::remote
