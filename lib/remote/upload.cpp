#include "remote/upload.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "remote/curl_options.h"
#include "remote/header_line.h"
#include "remote/http.h"
#include "remote/retry_policy.h"
#include "remote/url.h"

namespace tarmac::remote {
namespace {

// SHA-256 of an empty payload, for requests without a body. A request with one is sent as
// UNSIGNED-PAYLOAD (as the AWS SDKs do over HTTPS): libcurl 7.88 cannot hash a streamed body.
constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr size_t kErrorBodyLimit = 64 << 10;

std::string xml_value(const std::string& body, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const auto b = body.find(open);
  if (b == std::string::npos) return "";
  const auto e = body.find(close, b);
  if (e == std::string::npos) return "";
  return body.substr(b + open.size(), e - b - open.size());
}

}  // namespace

struct S3Client::Request {
  std::string method;  // GET HEAD PUT POST DELETE
  std::string name;    // the s3:// name, for messages
  std::string query;   // sorted by name, values percent-encoded
  std::vector<std::string> headers;
  std::string_view body;  // PUT or POST from memory
  int fd = -1;            // PUT from a file: `length` bytes from `offset`
  uint64_t offset = 0, length = 0;
  size_t body_limit = kErrorBodyLimit;
};

namespace {
S3Client::Request make_request(std::string method, std::string name, std::string query = "") {
  S3Client::Request r;
  r.method = std::move(method);
  r.name = std::move(name);
  r.query = std::move(query);
  return r;
}

// The Content-Type an object is stored with (and served with, to a browser or a CDN), by its
// name: without one, the object took the multipart creation's application/xml.
std::string content_type(std::string_view url) {
  if (url.ends_with(".tar")) return "Content-Type: application/x-tar";
  if (url.ends_with(".json")) return "Content-Type: application/json";
  return "Content-Type: application/octet-stream";  // labels.safetensors, the lock object
}
}  // namespace

struct S3Client::Response {
  long status = 0;
  std::string body;
  std::optional<uint64_t> content_length;
  std::string etag, crc32;
};

namespace {

struct Transfer {
  const S3Client::Request* req;
  S3Client::Response* resp;
  uint64_t sent = 0;  // bytes of the body handed to libcurl
  const S3Client* client;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<S3Client::Response*>(user);
  const std::string_view line(data, size * count);
  const std::string meta = std::string("x-amz-meta-") + kCrcMetadata + ":";
  if (line.starts_with("HTTP/")) {
    r->content_length.reset();
    r->etag.clear();
    r->crc32.clear();
  } else if (ieq_prefix(line, "content-length:")) {
    const std::string v = header_value(line, 15);
    if (!v.empty() && v.size() < 20 && v.find_first_not_of("0123456789") == std::string::npos)
      r->content_length = std::stoull(v);
  } else if (ieq_prefix(line, "etag:")) {
    r->etag = header_value(line, 5);
  } else if (ieq_prefix(line, meta)) {
    r->crc32 = header_value(line, meta.size());
  }
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->resp->body.size() + n > t->req->body_limit) return 0;
  t->resp->body.append(data, n);
  return n;
}

size_t on_read(char* out, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const S3Client::Request& r = *t->req;
  const size_t want = static_cast<size_t>(std::min<uint64_t>(size * count, r.length - t->sent));
  if (want == 0) return 0;
  if (r.fd < 0) {
    std::memcpy(out, r.body.data() + t->sent, want);
    t->sent += want;
    return want;
  }
  const ssize_t got = ::pread(r.fd, out, want, static_cast<off_t>(r.offset + t->sent));
  if (got <= 0) return CURL_READFUNC_ABORT;
  t->sent += static_cast<uint64_t>(got);
  return static_cast<size_t>(got);
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<Transfer*>(user)->client->stopping() ? 1 : 0;
}

}  // namespace

std::string S3Prefix::url(std::string_view name) const {
  return "s3://" + bucket + "/" + prefix + std::string(name);
}

S3Prefix parse_s3_prefix(const std::string& url) {
  const S3Location loc = parse_s3(url);
  S3Prefix p{loc.bucket, loc.key};
  if (!p.prefix.empty() && p.prefix.back() != '/') p.prefix += '/';  // parse_s3 refused "//"
  return p;
}

S3Client::S3Client(RemoteConfig config, const StopRequest* stop)
    : config_(std::move(config)), stop_(stop) {
  static std::once_flag once;  // curl_global_init is not thread-safe
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool S3Client::stopping() const {
  return cancelled_.load() || (stop_ && stop_->requested());
}

// What to do about a failed write or read of the destination, for the one line a user reads.
static std::string write_advice(const S3Client& c, const std::string& name, long status,
                                const std::string& code) {
  const RemoteConfig& config = c.config();
  const std::string creds =
      "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE; used: " +
      (config.credentials_from.empty() ? std::string("none") : config.credentials_from) +
      "), AWS_REGION (" + config.region + ") and the endpoint (" + config.s3_endpoint() + ")";
  const std::string bucket = parse_s3(name).bucket;
  if (code == "NoSuchBucket")
    return "no bucket '" + bucket + "' at " + config.s3_endpoint() +
           ": create it (aws s3 mb s3://" + bucket +
           ") or check the endpoint (--endpoint-url or AWS_ENDPOINT_URL)";
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "AuthorizationHeaderMalformed" || code == "InvalidToken" || code == "ExpiredToken")
    return "the server refused the credentials: " + creds;
  if (code == "AccessDenied" || status == 403 || status == 401)
    return "access denied: the credentials may lack write access to bucket '" + bucket +
           "' (s3:PutObject, s3:GetObject, s3:DeleteObject, s3:ListBucket): " + creds;
  if (code == "EntityTooSmall")
    return "the server refused a part under its minimum size: raise --multipart-size";
  if (retryable_status(status, code)) return "the server kept failing: try again later (--resume)";
  return "the server refused the request";
}

void S3Client::fail(const Request& r, const Response& resp) {
  const std::string code = s3_error_code(resp.body);
  std::string line = "cannot " +
                     std::string(r.method == "GET" || r.method == "HEAD" ? "read"
                                 : r.method == "DELETE"                  ? "delete"
                                                                         : "write") +
                     " '" + r.name + "': ";
  line += code.empty() ? "HTTP " + std::to_string(resp.status)
                       : code + " (HTTP " + std::to_string(resp.status) + ")";
  throw RemoteError(line + ": " + write_advice(*this, r.name, resp.status, code));
}

S3Client::Response S3Client::send(const Request& r) {
  const S3Location loc = parse_s3(r.name);
  std::string url = s3_object_url(config_.s3_endpoint(), loc);
  if (!r.query.empty()) url += "?" + r.query;
  const bool has_body = r.method == "PUT" || r.method == "POST";
  for (int failures = 0;;) {
    if (stopping()) throw TransferStopped(r.name);
    Response resp;
    Transfer t{&r, &resp, 0, this};
    CURL* h = curl_easy_init();
    if (!h) throw RemoteError("cannot write '" + r.name + "': libcurl could not start a transfer");
    curl_slist* headers = nullptr;
    set_transfer_options(h, config_, url);
    set_sigv4(h, config_);
    std::vector<std::string> extra = r.headers;
    extra.push_back(std::string("x-amz-content-sha256: ") +
                    (has_body ? "UNSIGNED-PAYLOAD" : kEmptySha256));
    if (!config_.session_token.empty())
      extra.push_back("x-amz-security-token: " + config_.session_token);
    // A POST's body is XML, but CreateMultipartUpload names the object's own type.
    if (r.method == "POST" && std::none_of(extra.begin(), extra.end(), [](const std::string& h) {
          return h.starts_with("Content-Type:");
        }))
      extra.emplace_back("Content-Type: application/xml");
    for (const auto& e : extra) headers = curl_slist_append(headers, e.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    Request sized = r;
    if (r.fd < 0) sized.length = r.body.size();
    t.req = &sized;
    if (r.method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (has_body) {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      if (r.method == "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
      curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
      curl_easy_setopt(h, CURLOPT_READDATA, &t);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(sized.length));
    } else if (r.method == "DELETE") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &resp);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    const CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
    curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    if (rc == CURLE_ABORTED_BY_CALLBACK || (rc != CURLE_OK && stopping()))
      throw TransferStopped(r.name);
    if (rc == CURLE_WRITE_ERROR)
      throw RemoteError("cannot write '" + r.name + "': the answer is larger than " +
                        std::to_string(r.body_limit) + " bytes");
    if (rc == CURLE_READ_ERROR || rc == CURLE_ABORTED_BY_CALLBACK)
      throw FatalError("cannot upload '" + r.name + "': its local file could not be read (" +
                       std::strerror(errno) + ")");
    std::string why;
    if (rc != CURLE_OK) {
      why = std::string(*detail ? detail : curl_easy_strerror(rc));
      const int max = rc == CURLE_COULDNT_CONNECT ? std::min(config_.retry.max_attempts, 3)
                                                  : config_.retry.max_attempts;
      if (!retryable_curl(rc) || failures + 1 >= max) {
        std::string line = "cannot write '" + r.name + "': " + why;
        if (failures > 0) line += " (" + std::to_string(failures + 1) + " tries)";
        if (const std::string advice = certificate_advice(rc, config_); !advice.empty())
          throw RemoteError(line + ": " + advice);
        if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
            rc == CURLE_OPERATION_TIMEDOUT)
          throw RemoteError(line + ": check that the server at " + config_.s3_endpoint() +
                            " is up and the endpoint is right (--endpoint-url or "
                            "AWS_ENDPOINT_URL)");
        throw RemoteError(line + ": check the network and try again (--resume)");
      }
    } else if (!retryable_status(resp.status, s3_error_code(resp.body))) {
      return resp;
    } else if (failures + 1 >= config_.retry.max_attempts) {
      fail(r, resp);
    }
    ++failures;
    counts_.retries.fetch_add(1);
    // Back off, polling the stop request.
    double wait = config_.retry.first_backoff_s;
    for (int i = 1; i < failures && wait < config_.retry.max_backoff_s; ++i) wait *= 2;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(std::min(wait, config_.retry.max_backoff_s));
    while (std::chrono::steady_clock::now() < until) {
      if (stopping()) throw TransferStopped(r.name);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

ObjectInfo S3Client::head(const std::string& url) {
  Request r = make_request("HEAD", url);
  const Response resp = send(r);
  ObjectInfo info;
  if (resp.status == 404) {
    // A HEAD answer has no body: ask with GET whether the key or the bucket is missing.
    Request g = make_request("GET", url);
    g.body_limit = kErrorBodyLimit;
    const Response got = send(g);
    if (got.status == 404 && s3_error_code(got.body) == "NoSuchBucket") fail(g, got);
    if (got.status < 300)
      throw RemoteError("cannot read '" + url +
                        "': HEAD answered HTTP 404 but GET succeeds: the server is "
                        "inconsistent; try again");
    if (got.status != 404) fail(g, got);
    return info;
  }
  if (resp.status >= 300) {
    Request g = make_request("GET", url);
    const Response got = send(g);
    fail(g, got.status >= 300 ? got : resp);
  }
  info.exists = true;
  info.size = resp.content_length.value_or(0);
  info.etag = resp.etag;
  info.crc32 = resp.crc32;
  return info;
}

std::optional<std::string> S3Client::get(const std::string& url, size_t limit) {
  Request r = make_request("GET", url);
  r.body_limit = limit;
  Response resp = send(r);
  if (resp.status == 404 && s3_error_code(resp.body) != "NoSuchBucket") return std::nullopt;
  if (resp.status >= 300) fail(r, resp);
  return std::move(resp.body);
}

void S3Client::put(const std::string& url, std::string_view data, const std::string& crc32) {
  Request r = make_request("PUT", url);
  r.body = data;
  r.headers.push_back(content_type(url));
  if (!crc32.empty()) r.headers.push_back(std::string("x-amz-meta-") + kCrcMetadata + ": " + crc32);
  const Response resp = send(r);
  if (resp.status >= 300) fail(r, resp);
}

S3Client::Created S3Client::create_if_absent(const std::string& url, std::string_view data) {
  Request r = make_request("PUT", url);
  r.body = data;
  r.headers.push_back(content_type(url));
  r.headers.emplace_back("If-None-Match: *");
  const Response resp = send(r);
  if (resp.status < 300) return Created::Yes;
  const std::string code = s3_error_code(resp.body);
  if (resp.status == 412 || resp.status == 409 || code == "PreconditionFailed" ||
      code == "ConditionalRequestConflict")
    return Created::Exists;
  if (resp.status == 501 || code == "NotImplemented") return Created::Unsupported;
  fail(r, resp);
}

void S3Client::remove(const std::string& url) {
  Request r = make_request("DELETE", url);
  const Response resp = send(r);
  if (resp.status >= 300 && resp.status != 404) fail(r, resp);
}

void S3Client::put_file(const std::string& url, const std::string& path, const std::string& crc32,
                        uint64_t part_size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FatalError("cannot upload '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) throw FatalError("cannot upload '" + path + "': " + std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(end);
  const std::string meta = std::string("x-amz-meta-") + kCrcMetadata + ": " + crc32;
  if (size <= part_size) {
    Request r = make_request("PUT", url);
    r.fd = fd;
    r.length = size;
    r.headers.push_back(content_type(url));
    if (!crc32.empty()) r.headers.push_back(meta);
    const Response resp = send(r);
    if (resp.status >= 300) fail(r, resp);
    counts_.objects.fetch_add(1);
    counts_.bytes.fetch_add(size);
    return;
  }
  // Parts of part_size (more when the file would need over kMaxParts).
  const uint64_t psize = std::max(part_size, (size + kMaxParts - 1) / kMaxParts);
  Request create = make_request("POST", url, "uploads=");
  create.headers.push_back(content_type(url));
  if (!crc32.empty()) create.headers.push_back(meta);
  const Response created = send(create);
  if (created.status >= 300) fail(create, created);
  const std::string upload_id = xml_value(created.body, "UploadId");
  if (upload_id.empty())
    throw RemoteError("cannot write '" + url +
                      "': the server's answer to CreateMultipartUpload holds no UploadId");
  const std::string id_query = "uploadId=" + uri_encode(upload_id, true);
  try {
    std::string complete = "<CompleteMultipartUpload>";
    for (uint64_t off = 0, n = 1; off < size; off += psize, ++n) {
      Request part = make_request("PUT", url, "partNumber=" + std::to_string(n) + "&" + id_query);
      part.fd = fd;
      part.offset = off;
      part.length = std::min(psize, size - off);
      const Response resp = send(part);
      if (resp.status >= 300) fail(part, resp);
      if (resp.etag.empty())
        throw RemoteError("cannot write '" + url + "': the server answered part " +
                          std::to_string(n) + " without an ETag");
      counts_.parts.fetch_add(1);
      complete += "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" + resp.etag +
                  "</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    Request done = make_request("POST", url, id_query);
    done.body = complete;
    const Response resp = send(done);
    // S3 may answer 200 and say in the body that the completion failed.
    if (resp.status >= 300 || !s3_error_code(resp.body).empty()) {
      Response as_error = resp;
      if (as_error.status < 300) as_error.status = 500;
      fail(done, as_error);
    }
  } catch (...) {
    // The parts sent are billed until aborted; a stop leaves them to the resumed run's abort
    // rule (docs/reliability.md) as the abort would outlast the stop's bound.
    if (!stopping()) try {
        Request abort = make_request("DELETE", url, id_query);
        send(abort);
      } catch (const std::exception&) {
      }
    throw;
  }
  counts_.objects.fetch_add(1);
  counts_.multipart.fetch_add(1);
  counts_.bytes.fetch_add(size);
}

ObjectUploader::ObjectUploader(S3Client& client, uint64_t part_size, size_t max_pending,
                               std::function<void(const Job&)> on_done)
    : client_(client),
      part_size_(part_size),
      max_pending_(std::max<size_t>(1, max_pending)),
      on_done_(std::move(on_done)) {
  thread_ = std::thread([this] { run(); });
}

ObjectUploader::~ObjectUploader() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
    if (busy_) client_.cancel();
  }
  cv_.notify_all();
  thread_.join();
}

void ObjectUploader::run() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return quit_ || (!queue_.empty() && !failure_); });
      if (quit_) return;
      job = queue_.front();
      busy_ = true;
    }
    try {
      client_.put_file(job.url, job.path, job.crc32, part_size_);
      on_done_(job);
      std::lock_guard lock(mu_);
      queue_.pop_front();
      busy_ = false;
    } catch (...) {
      std::lock_guard lock(mu_);
      failure_ = std::current_exception();
      busy_ = false;
    }
    cv_.notify_all();
  }
}

void ObjectUploader::check() const {
  std::lock_guard lock(mu_);
  if (failure_) std::rethrow_exception(failure_);
}

bool ObjectUploader::push(Job job, const std::function<bool()>& keep_waiting) {
  std::unique_lock lock(mu_);
  while (queue_.size() >= max_pending_ && !failure_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    const bool go_on = keep_waiting();
    lock.lock();
    if (!go_on) return false;
  }
  // The upload thread saw the stop first (its transfer abandoned): the caller stops as well,
  // the file left for --resume; reporting it as a failed write would exit 1, not 128+signal.
  if (failure_ && client_.stopping()) return false;
  if (failure_) std::rethrow_exception(failure_);
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return true;
}

void ObjectUploader::drain(const std::function<void()>& wait_tick) {
  std::unique_lock lock(mu_);
  while (!queue_.empty() && !failure_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    wait_tick();
    lock.lock();
  }
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace tarmac::remote
