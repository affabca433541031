#pragma once
// Shared by the server tests: a byte-level micro model (infer_fixtures.h) with a longer
// context, the library generation a request must equal, and a server running in this
// process on a free loopback port with a client for it.
#include <httplib.h>

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
  o.max_connections = 16;
  return o;
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
