// download_to_memory against a one-thread HTTP server on 127.0.0.1 written here (the full
// retry and range behaviour is tested against real servers in tests/e2e/test_s3.py and
// test_remote_table.py): the bytes as served, and the limit, with or without Content-Length.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "remote/fetch.h"
#include "remote/http.h"

using namespace tarmac::remote;

namespace {

// Answers each request on a port of 127.0.0.1 with `body`, then closes the connection; with a
// Content-Length header or without one (the body ends with the connection).
class OneShotServer {
 public:
  OneShotServer(std::string body, bool content_length) : body_(std::move(body)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/t.csv";
    thread_ = std::thread([this, content_length] {
      while (true) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        std::string head;
        char buf[4096];
        while (head.find("\r\n\r\n") == std::string::npos) {
          const ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          head.append(buf, static_cast<size_t>(n));
        }
        std::string answer = "HTTP/1.1 200 OK\r\nConnection: close\r\n";
        if (content_length) answer += "Content-Length: " + std::to_string(body_.size()) + "\r\n";
        answer += "\r\n";
        if (!head.starts_with("HEAD ")) answer += body_;
        for (size_t at = 0; at < answer.size();) {
          const ssize_t n = ::send(c, answer.data() + at, answer.size() - at, MSG_NOSIGNAL);
          if (n <= 0) break;
          at += static_cast<size_t>(n);
        }
        ::close(c);
      }
    });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  const std::string& url() const { return url_; }

 private:
  std::string body_;
  int fd_ = -1;
  std::string url_;
  std::thread thread_;
};

std::string body_of(size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

}  // namespace

TEST_CASE("download_to_memory: the object's bytes, at most the limit", "[remote]") {
  const RemoteConfig config;
  for (const bool content_length : {true, false}) {
    const std::string body = body_of(3 << 20);  // more than a read (1 MiB)
    OneShotServer server(body, content_length);
    const Target t = target_for(server.url(), config);
    const std::vector<uint8_t> got = download_to_memory(t, config, body.size());
    CHECK(std::string(got.begin(), got.end()) == body);
    if (content_length)  // the size the server said, before the bytes
      CHECK_THROWS_WITH(
          download_to_memory(t, config, 1000),
          "cannot read '" + server.url() + "': it holds 3.0 MiB, over the limit of 1000 B");
    else
      CHECK_THROWS_WITH(download_to_memory(t, config, body.size() - 1),
                        "cannot read '" + server.url() + "': it holds more, over the limit of " +
                            tarmac::format_bytes(body.size() - 1));
  }
}
