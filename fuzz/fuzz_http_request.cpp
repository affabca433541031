// libFuzzer target: the HTTP request reader of `sps serve` on arbitrary bytes taken as what
// one connection sent (headers, bodies, chunks, several requests in a row): the framing that
// finds where each request ends (serve/http_framing.h), then cpp-httplib's parse of each
// framed request, as serve/connections.h hands it over. Any crash or sanitizer report is a
// bug, and so is a frame that reaches past the bytes, a prefix of a complete request that
// does not need more, a refusal with another status or no message, or a framed request
// cpp-httplib answers with anything but an HTTP/1.1 response.
#include <httplib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "serve/http_framing.h"

namespace {

using sps::serve::FramingLimits;
using sps::serve::RequestFrame;
using State = RequestFrame::State;

// cpp-httplib's request processing, with routes like the server's.
class Server : public httplib::Server {
 public:
  Server() {
    const auto size = [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    };
    Get("/health", size);
    Post("/tokenize", size);
    Post("/v1/completions", size);
  }
  using httplib::Server::process_request;
};

// One framed request to read, and the answer written.
class Stream : public httplib::Stream {
 public:
  explicit Stream(std::string_view request) : request_(request) {}
  bool is_readable() const override { return read_ < request_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* out, size_t size) override {
    size = std::min(size, request_.size() - read_);
    std::memcpy(out, request_.data() + read_, size);
    read_ += size;
    return ssize_t(size);
  }
  ssize_t write(const char* bytes, size_t size) override {
    written.append(bytes, size);
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 1;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 2;
  }
  socket_t socket() const override { return -1; }
  std::string written;

 private:
  std::string_view request_;
  size_t read_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server server;
  FramingLimits limits;  // small, so that inputs reach them
  limits.max_head_bytes = 2048;
  limits.max_body_bytes = 2048;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int requests = 0; requests < 16 && !rest.empty(); ++requests) {
    const RequestFrame f = sps::serve::frame_request(rest, limits);
    if (f.state == State::bad) {
      const bool known = f.status == 400 || f.status == 413 || f.status == 431 || f.status == 501;
      if (!known || f.message.empty()) __builtin_trap();
      break;
    }
    if (f.state != State::complete) break;  // needs more bytes
    if (f.frame_bytes == 0 || f.frame_bytes > rest.size() || f.head_bytes > f.frame_bytes)
      __builtin_trap();
    if (f.expects_continue && !(f.expect_begin < f.expect_end && f.expect_end <= f.head_bytes))
      __builtin_trap();
    // Framing decides from whole lines and declared sizes: a request cut short needs more.
    for (const size_t cut : {f.frame_bytes - 1, f.head_bytes - 1, f.frame_bytes / 2}) {
      const State s = sps::serve::frame_request(rest.substr(0, cut), limits).state;
      if (s != State::need_head && s != State::need_body) __builtin_trap();
    }
    // Framing resumed as the bytes arrive ends where a fresh start does.
    RequestFrame resumed;
    for (size_t n = 1; n <= f.frame_bytes; n += 1 + n / 8)
      resumed = sps::serve::frame_request(rest.substr(0, n), limits, resumed);
    resumed = sps::serve::frame_request(rest.substr(0, f.frame_bytes), limits, resumed);
    if (resumed.state != State::complete || resumed.frame_bytes != f.frame_bytes) __builtin_trap();
    Stream stream(rest.substr(0, f.frame_bytes));
    bool closed = false;
    server.process_request(stream, false, closed, nullptr);
    if (stream.written.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
    rest.remove_prefix(f.frame_bytes);
  }
  return 0;
}
