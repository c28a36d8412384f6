#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "remote/http.h"
#include "remote/inputs.h"
#include "remote/object_cache.h"
#include "remote/remote_config.h"
#include "remote/url.h"

using namespace tarmac::remote;
using Names = std::vector<std::string>;
namespace fs = std::filesystem;

TEST_CASE("brace ranges expand as WebDataset writes them", "[remote]") {
  CHECK(expand_braces("s3://b/shard-{000000..000002}.tar") ==
        Names{"s3://b/shard-000000.tar", "s3://b/shard-000001.tar", "s3://b/shard-000002.tar"});
  CHECK(expand_braces("x{8..11}") == Names{"x8", "x9", "x10", "x11"});
  CHECK(expand_braces("x{098..100}") == Names{"x098", "x099", "x100"});
  CHECK(expand_braces("{a,b}-{0..1}") == Names{"a-0", "a-1", "b-0", "b-1"});
  CHECK(expand_braces("plain") == Names{"plain"});
  CHECK_THROWS_AS(expand_braces("x{1..}"), tarmac::ParseError);
  CHECK_THROWS_AS(expand_braces("x{3..1}"), tarmac::ParseError);
  CHECK_THROWS_AS(expand_braces("x{0..-1}"), tarmac::ParseError);
  CHECK_THROWS_AS(expand_braces("x{0..1"), tarmac::ParseError);
  CHECK_THROWS_AS(expand_braces("x}"), tarmac::ParseError);
  CHECK_THROWS_AS(expand_braces("x{0..9}{0..9}", 50), tarmac::ParseError);
}

TEST_CASE("s3 names: bucket, key, path-style URL", "[remote]") {
  CHECK(is_remote("s3://b/k"));
  CHECK(is_remote("https://h/x.tar"));
  CHECK(is_remote("http://h/x.tar"));
  CHECK_FALSE(is_remote("s3:/b/k"));
  CHECK_FALSE(is_remote("data/s3://x"));
  const S3Location loc = parse_s3("s3://my-bucket/dir/a b+c.tar");
  CHECK(loc.bucket == "my-bucket");
  CHECK(loc.key == "dir/a b+c.tar");
  CHECK(s3_object_url("http://127.0.0.1:9000", loc) ==
        "http://127.0.0.1:9000/my-bucket/dir/a%20b%2Bc.tar");
  CHECK(parse_s3("s3://b").key.empty());
  CHECK_THROWS_AS(parse_s3("s3:///k"), tarmac::ParseError);
  CHECK_THROWS_AS(parse_s3("s3://b?x/k"), tarmac::ParseError);
  CHECK(uri_encode("a/b~c_d.e-f\xc3\xa9", true) == "a%2Fb~c_d.e-f%C3%A9");
}

TEST_CASE("s3 names with empty, '.' or '..' parts are refused, the advice accepted", "[remote]") {
  CHECK(parse_s3("s3://b/p/").key == "p/");
  CHECK(parse_s3("s3://b/").key.empty());
  CHECK(parse_s3("s3://b/a..b/.x/x.").key == "a..b/.x/x.");
  for (const char* bad : {"s3://b/p3/../p3b", "s3://b//p", "s3://b/p//", "s3://b/./p", "s3://b/p/.",
                          "s3://b/p/..", "s3://b/a//b/c.tar"}) {
    CAPTURE(bad);
    std::string advice;
    try {
      parse_s3(bad);
    } catch (const tarmac::ParseError& e) {
      const std::string what = e.what();
      const auto at = what.find("(e.g. ");
      REQUIRE(at != std::string::npos);
      advice = what.substr(at + 6, what.size() - at - 7);
    }
    REQUIRE(!advice.empty());
    CHECK_NOTHROW(parse_s3(advice));
  }
  try {
    parse_s3("s3://b//p");
  } catch (const tarmac::ParseError& e) {
    CHECK(std::string(e.what()).find("(e.g. s3://b/p)") != std::string::npos);
  }
}

TEST_CASE("a ListObjectsV2 answer: keys decoded, sizes, continuation", "[remote]") {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name><Prefix>d/</Prefix>"
      "<KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>t&amp;1</NextContinuationToken>"
      "<Contents><Key>d/a&amp;b &lt;1&gt;.tar</Key><Size>10</Size></Contents>"
      "<Contents><Key>d/&#233;&#x4e2d;.tar</Key><LastModified>x</LastModified>"
      "<Size>18446744073</Size></Contents></ListBucketResult>";
  const ListPage page = parse_list_page(xml);
  REQUIRE(page.objects.size() == 2);
  CHECK(page.objects[0] == std::pair<std::string, uint64_t>("d/a&b <1>.tar", 10));
  CHECK(page.objects[1] ==
        std::pair<std::string, uint64_t>("d/\xc3\xa9\xe4\xb8\xad.tar", 18446744073));
  CHECK(page.truncated);
  CHECK(page.next_token == "t&1");
  CHECK_FALSE(parse_list_page("<ListBucketResult></ListBucketResult>").truncated);
  CHECK_THROWS_AS(parse_list_page("<Error><Code>AccessDenied</Code></Error>"), tarmac::ParseError);
  CHECK_THROWS_AS(parse_list_page("<ListBucketResult><Contents><Key>a</Key></Contents>"),
                  tarmac::ParseError);
  CHECK_THROWS_AS(
      parse_list_page("<ListBucketResult><Contents><Key>a&bogus;</Key><Size>1</Size></Contents>"),
      tarmac::ParseError);
  CHECK_THROWS_AS(parse_list_page("<ListBucketResult><IsTruncated>true</IsTruncated>"),
                  tarmac::ParseError);
  CHECK(s3_error_code("<Error><Code>NoSuchKey</Code><Message>m</Message></Error>") == "NoSuchKey");
  CHECK(s3_error_code("<html>bad gateway</html>").empty());
}

namespace {

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("credentials and region as the AWS CLI reads them", "[remote]") {
  const fs::path dir =
      fs::temp_directory_path() / ("tarmac_remote_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "credentials")
      << "[default]\naws_access_key_id = DEF\naws_secret_access_key = "
         "defsecret\n\n[other]\naws_access_key_id=OTH\n"
         "aws_secret_access_key=oth:secret\naws_session_token = tok\n";
  std::ofstream(dir / "config")
      << "[default]\nregion = eu-west-3\n[profile other]\nregion = ap-south-1\n"
         "ca_bundle = /etc/other-ca.pem\n";
  EnvVar files("AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").c_str());
  EnvVar config("AWS_CONFIG_FILE", (dir / "config").c_str());
  EnvVar region("AWS_REGION", nullptr), region2("AWS_DEFAULT_REGION", nullptr);
  EnvVar e1("AWS_ENDPOINT_URL", nullptr), e2("AWS_ENDPOINT_URL_S3", nullptr);
  EnvVar token("AWS_SESSION_TOKEN", nullptr);
  EnvVar ca("AWS_CA_BUNDLE", nullptr);
  {
    EnvVar id("AWS_ACCESS_KEY_ID", "ENVKEY"), secret("AWS_SECRET_ACCESS_KEY", "envsecret");
    EnvVar profile("AWS_PROFILE", "other");
    const RemoteConfig c = RemoteConfig::from_environment("http://h:1/");
    CHECK(c.access_key == "ENVKEY");  // the environment before any profile
    CHECK(c.secret_key == "envsecret");
    CHECK(c.region == "ap-south-1");
    CHECK(c.s3_endpoint() == "http://h:1");
    CHECK(c.ca_bundle == "/etc/other-ca.pem");  // the profile's ca_bundle
    EnvVar bundle("AWS_CA_BUNDLE", "/tmp/env-ca.pem");
    CHECK(RemoteConfig::from_environment().ca_bundle == "/tmp/env-ca.pem");  // the environment's
  }
  EnvVar id("AWS_ACCESS_KEY_ID", nullptr), secret("AWS_SECRET_ACCESS_KEY", nullptr);
  {
    EnvVar profile("AWS_PROFILE", nullptr);
    const RemoteConfig c = RemoteConfig::from_environment();
    CHECK(c.access_key == "DEF");
    CHECK(c.region == "eu-west-3");
    CHECK(c.ca_bundle.empty());  // the system's authorities
    CHECK(c.s3_endpoint() == "https://s3.eu-west-3.amazonaws.com");
  }
  {
    EnvVar profile("AWS_PROFILE", "other");
    EnvVar r("AWS_REGION", "us-west-2");
    EnvVar endpoint("AWS_ENDPOINT_URL", "http://e:2");
    const RemoteConfig c = RemoteConfig::from_environment();
    CHECK(c.access_key == "OTH");
    CHECK(c.secret_key == "oth:secret");
    CHECK(c.session_token == "tok");
    CHECK(c.region == "us-west-2");
    CHECK(c.s3_endpoint() == "http://e:2");
  }
  {
    EnvVar profile("AWS_PROFILE", "missing");
    CHECK_THROWS_AS(RemoteConfig::from_environment(), RemoteError);
  }
  {
    EnvVar profile("AWS_PROFILE", nullptr);
    EnvVar none("AWS_SHARED_CREDENTIALS_FILE", (dir / "absent").c_str());
    const RemoteConfig c = RemoteConfig::from_environment();
    CHECK(c.access_key.empty());
    CHECK_THROWS_AS(target_for("s3://b/k", c), RemoteError);  // no credentials: refused
    CHECK(target_for("https://h/k.tar", c).url == "https://h/k.tar");
  }
  fs::remove_all(dir);
}

TEST_CASE("the object cache: where objects go, CRC-32 of files, LRU eviction", "[remote]") {
  const fs::path dir =
      fs::temp_directory_path() / ("tarmac-cache-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ObjectCache cache(dir.string(), 250, RemoteConfig{});
  CHECK(cache.local_path("s3://bkt/train/shard-000001.tar") ==
        (dir / "bkt" / "train" / "shard-000001.tar").string());
  CHECK(cache.local_path("https://host:8443/data/ds/labels.safetensors?x=1") ==
        (dir / "host:8443" / "data" / "ds" / "labels.safetensors").string());
  CHECK_THROWS_AS(cache.local_path("s3://bkt/a/../b"), tarmac::ParseError);
  CHECK_THROWS_AS(cache.local_path("s3://bkt/a//b"), tarmac::ParseError);
  CHECK_THROWS_AS(cache.local_path("/local/file"), tarmac::ParseError);

  // Five 100-byte objects, oldest first; a lock file and a download in flight are not counted.
  fs::create_directories(dir / "bkt" / "p");
  const auto now = fs::file_time_type::clock::now();
  for (int k = 0; k < 5; ++k) {
    const fs::path f = dir / "bkt" / "p" / ("o" + std::to_string(k));
    std::ofstream(f, std::ios::binary) << std::string(100, static_cast<char>('a' + k));
    fs::last_write_time(f, now - std::chrono::minutes(10 - k));
  }
  std::ofstream(dir / "bkt" / "p" / ".o0.lock") << "";
  std::ofstream(dir / "bkt" / "p" / "o9.part-1-1") << std::string(1000, 'z');
  CHECK(file_crc32((dir / "bkt" / "p" / "o0").string()) == 0xaf707a64u);  // zlib.crc32(b"a" * 100)
  CHECK_FALSE(file_crc32((dir / "none").string()));
  cache.evict((dir / "bkt" / "p" / "o0").string());  // the oldest, but in use: kept
  CHECK(fs::exists(dir / "bkt" / "p" / "o0"));
  CHECK_FALSE(fs::exists(dir / "bkt" / "p" / "o1"));
  CHECK_FALSE(fs::exists(dir / "bkt" / "p" / "o2"));
  CHECK_FALSE(fs::exists(dir / "bkt" / "p" / "o3"));
  CHECK(fs::exists(dir / "bkt" / "p" / "o4"));  // 200 bytes left: at most 250
  CHECK(fs::exists(dir / "bkt" / "p" / ".o0.lock"));
  CHECK(fs::exists(dir / "bkt" / "p" / "o9.part-1-1"));
  fs::remove_all(dir);
}
