#pragma once
// The HTTP layer of `sps serve` (cpp-httplib, its connections handled by serve/connections.h):
// OpenAI-style routes over the scheduler (serve/scheduler.h), API key, body, time and
// connection limits, and a graceful shutdown.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"
#include "serve/connections.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/scheduler.h"
#include "tokenizer/bpe.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace sps::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (bind() says which)
  std::string model_name = "sps";  // the id /v1/models lists and requests may name
  std::string api_key;             // empty: no authentication; only whitespace: refused
  SchedulerOptions scheduler;
  // Caps, deadlines, the largest body (connections.framing.max_body_bytes: larger is 413)
  // and the Retry-After of every 503 (connections.retry_after_seconds).
  ConnectionLimits connections;
};

class Server {
 public:
  Server(Model<float>& model, const BpeTokenizer& tokenizer, ServerOptions options);
  ~Server();

  // Binds the listening socket; returns the port. UserError naming the address and port if
  // it cannot (in use by another server, or not an address of this machine).
  int bind();
  // Serves until shutdown(); returns then.
  void listen();
  // Stops accepting completions (503), lets running ones finish for up to `grace`, cancels
  // the rest, closes the listener. Safe from any thread, once or more.
  void shutdown(std::chrono::milliseconds grace);

  Metrics& metrics() { return metrics_; }

 private:
  struct Prepared;
  void configure_http();
  void routes();
  // POST /v1/completions and /v1/chat/completions: prepare and submit the jobs, then answer
  // once they end (answer_whole) or as server-sent events (answer_stream).
  void complete(const httplib::Request& req, httplib::Response& res, bool chat);
  std::shared_ptr<Prepared> prepare(const std::string& body, bool chat) const;  // or ApiError
  std::shared_ptr<Job> make_job(const Prompt& prompt, const CompletionRequest& request,
                                uint64_t seed, std::string& prompt_text) const;
  void submit(const Prepared& p);  // ApiError 503 when the queue is full or stopping
  // Every error answer; a 503 also says when to retry (Retry-After).
  void send_error(httplib::Response& res, const ApiError& e) const;
  void answer_whole(const Prepared& p, const httplib::Request& req, httplib::Response& res);
  void answer_stream(std::shared_ptr<Prepared> p, httplib::Response& res);

  Model<float>& model_;
  const BpeTokenizer& tokenizer_;
  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> open_streams_{0};  // event streams not yet fully written
  std::atomic<uint64_t> next_id_{0};
};

// True when `given` equals `expected`, in time that depends only on their lengths.
bool constant_time_equal(const std::string& given, const std::string& expected);

}  // namespace sps::serve
