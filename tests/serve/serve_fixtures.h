#pragma once
// Shared by the server tests: a byte-level micro model (infer_fixtures.h) with a longer
// context, the library generation a request must equal, and a server running in this
// process on a free loopback port with a client for it.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "infer/generator.h"
#include "infer/infer_fixtures.h"
#include "serve/responses.h"
#include "serve/server.h"

namespace sps::testing {

inline ModelConfig serve_config(const std::string& family) {
  ModelConfig c = byte_micro_config(family, family == "standard" ? 0 : 4);
  c.block_size = 48;
  return c;
}

struct ServeModel {
  ModelConfig config;
  // `model` is served; `reference`, the same weights, computes what generating alone gives.
  // Two objects: a model's work buffers belong to one thread, and the server's thread may
  // still be decoding while a test computes an expected answer.
  std::unique_ptr<Model<float>> model, reference;
  explicit ServeModel(const std::string& family, uint64_t seed = 5)
      : ServeModel(serve_config(family), seed) {}
  explicit ServeModel(const ModelConfig& c, uint64_t seed = 5) : config(c) {
    model = std::make_unique<Model<float>>(config);
    randomize_weights(*model, seed);
    reference = std::make_unique<Model<float>>(config);
    randomize_weights(*reference, seed);
  }

  // What `sps generate` (the library it runs) gives for one prompt alone.
  Generation generate(const std::vector<int32_t>& prompt, int64_t max_tokens, double temperature,
                      int64_t top_k, uint64_t seed, std::vector<std::string> stop = {},
                      bool stop_at_eos = true) {
    GenerationOptions o;
    o.max_new_tokens = max_tokens;
    o.sampling.temperature = temperature;
    o.sampling.top_k = top_k;
    o.sampling.seed = seed;
    o.sampling.allowed_ids = byte_level_tokenizer().vocab_size();
    o.stop_strings = std::move(stop);
    o.stop_at_eos = stop_at_eos;
    Generator g(*reference, &byte_level_tokenizer(), o);
    return g.generate({prompt})[0];
  }
};

inline std::vector<int32_t> byte_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (uint32_t id : byte_level_tokenizer().encode(text)) ids.push_back(int32_t(id));
  return ids;
}

// Text as a JSON answer carries it: bytes that are not UTF-8 become U+FFFD (a byte-level
// model's text is often not UTF-8).
inline std::string as_json_text(const std::string& text) {
  return nlohmann::json::parse(serve::dump(nlohmann::json(text))).get<std::string>();
}

// A server in this process; stopped (gracefully) by the destructor.
struct LiveServer {
  std::unique_ptr<serve::Server> server;
  std::thread thread;
  int port = 0;

  LiveServer(Model<float>& model, serve::ServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    server = std::make_unique<serve::Server>(model, byte_level_tokenizer(), options);
    port = server->bind();
    thread = std::thread([this] { server->listen(); });
  }
  ~LiveServer() { stop(std::chrono::milliseconds(2000)); }
  void stop(std::chrono::milliseconds grace) {
    if (!thread.joinable()) return;
    server->shutdown(grace);
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
};

inline serve::ServerOptions small_server(int64_t rows = 4, int64_t queue = 16) {
  serve::ServerOptions o;
  o.model_name = "micro";
  o.scheduler.rows = rows;
  o.scheduler.queue_limit = queue;
  o.connections.max_connections = 16;
  return o;
}

// A raw TCP connection to a server on this machine, from a loopback address of the test's
// choosing (all of 127.0.0.0/8 is this machine), so one test can act as several clients and
// send bytes no HTTP library would.
class RawConnection {
 public:
  RawConnection(int port, const std::string& source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{}, to{};
    from.sin_family = to.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons(uint16_t(port));
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0)
      close();
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // All of `bytes`; false once the server has closed its side.
  bool send(const std::string& bytes) {
    size_t done = 0;
    while (fd_ >= 0 && done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += size_t(n);
    }
    return fd_ >= 0;
  }
  // What arrives until the server closes the connection (`closed`) or `timeout` passes.
  std::string read_until_closed(std::chrono::milliseconds timeout, bool* closed = nullptr) {
    std::string out = std::move(pending_);
    pending_.clear();
    const bool ended = read_into(out, timeout, [](const std::string&) { return false; });
    if (closed) *closed = ended;
    return out;
  }
  // The next `count` answers (each with a Content-Length body, or none), as sent; fewer if
  // the connection closes or `timeout` passes first.
  std::vector<std::string> read_responses(size_t count, std::chrono::milliseconds timeout) {
    std::vector<std::string> out;
    const auto take = [&](std::string& bytes) {
      while (out.size() < count) {
        const size_t head = bytes.find("\r\n\r\n");
        if (head == std::string::npos) return false;
        size_t length = 0;
        std::string lower = bytes.substr(0, head);
        for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
        const size_t at = lower.find("\r\ncontent-length:");
        if (at != std::string::npos) length = std::stoul(lower.substr(at + 17));
        if (bytes.size() < head + 4 + length) return false;
        out.push_back(bytes.substr(0, head + 4 + length));
        bytes.erase(0, head + 4 + length);
      }
      return true;
    };
    if (!take(pending_)) read_into(pending_, timeout, take);
    return out;
  }

 private:
  // Reads into `bytes` until `done(bytes)`, the peer closes (true) or `timeout` passes.
  template <typename Done>
  bool read_into(std::string& bytes, std::chrono::milliseconds timeout, Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (fd_ >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return true;
      bytes.append(chunk, size_t(n));
      if (done(bytes)) return false;
    }
    return true;
  }

  int fd_ = -1;
  std::string pending_;  // read past the answers returned so far
};

// The status of an answer read whole ("HTTP/1.1 200 OK…"), or -1.
inline int status_of(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(response.c_str() + 9) : -1;
}

inline nlohmann::json post_json(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                                int* status = nullptr) {
  auto res = c.Post(path.c_str(), serve::dump(body), "application/json");
  if (!res) {
    if (status) *status = -1;
    return nullptr;
  }
  if (status) *status = res->status;
  return nlohmann::json::parse(res->body, nullptr, false);
}

}  // namespace sps::testing
