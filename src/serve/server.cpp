#include "serve/server.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "serve/connection_watch.h"
#include "serve/request.h"
#include "serve/responses.h"
#include "util/error.h"

namespace sps::serve {

using nlohmann::json;

bool constant_time_equal(const std::string& given, const std::string& expected) {
  // Every byte of `given` is compared (against `expected` cycled), so the time says nothing
  // about where a wrong key first differs.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  if (expected.empty()) return given.empty();
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  return diff == 0;
}

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

ApiError busy(const char* why) {
  return ApiError(503, why, "", "server_error", "overloaded");
}

void cancel_all(const std::vector<std::shared_ptr<Job>>& jobs) {
  for (const auto& job : jobs) job->cancel();
}

}  // namespace

// A request turned into scheduler jobs (one per prompt, each with n choices).
struct Server::Prepared {
  CompletionRequest request;
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<std::string> prompt_texts;  // for echo
  int64_t prompt_tokens = 0;
  ResponseHead head;
};

Server::Server(Model<float>& model, const BpeTokenizer& tokenizer, ServerOptions options)
    : model_(model), tokenizer_(tokenizer), options_(std::move(options)) {
  if (!options_.api_key.empty() &&
      options_.api_key.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("the API key is only whitespace; give a real key, or none for an open server");
  if (options_.scheduler.context <= 0) options_.scheduler.context = model_.config().block_size;
  scheduler_ = std::make_unique<Scheduler>(model_, tokenizer_, options_.scheduler, metrics_);
  http_ = make_http_server(options_.connections, metrics_);
  configure_http();
  routes();
}

Server::~Server() { shutdown(std::chrono::milliseconds(0)); }

int Server::bind() {
  int port = options_.port;
  errno = 0;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) fail("cannot bind {} on a free port", options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    if (errno == EADDRINUSE)
      fail("cannot listen on {}:{}: port {} is in use (another server runs there?)", options_.host,
           port, port);
    fail("cannot listen on {}:{} ({}; is {} an address of this machine?)", options_.host, port,
         errno ? std::strerror(errno) : "the address does not resolve", options_.host);
  }
  widen_listen_backlog(*http_);
  return port;
}

void Server::listen() {
  if (shutting_down_) return;  // a signal that came before listening
  http_->listen_after_bind();
}

void Server::shutdown(std::chrono::milliseconds grace) {
  if (shutting_down_.exchange(true)) return;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  scheduler_->drain(grace);  // every job is now finished or cancelled
  // Let the streams write their last events and [DONE]: httplib stops writing chunks as soon
  // as the server stops. The writers only forward what the jobs hold, so this is short.
  while (open_streams_ > 0 && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  http_->stop();  // closes the listener; listen() returns once handlers are done
}

// Limits, timeouts, the API key check and the error, exception and logging handlers.
void Server::configure_http() {
  httplib::Server& http = *http_;
  // A streamed token is a small write: without TCP_NODELAY, Nagle's algorithm holds it until
  // the client's delayed ACK (~40 ms on Linux), which measured as a 40 ms inter-token latency.
  http.set_tcp_nodelay(true);

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const bool ok = header.compare(0, prefix.size(), prefix) == 0 &&
                    constant_time_equal(header.substr(prefix.size()), options_.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, ApiError(401, "invalid or missing API key (Authorization: Bearer KEY)", "",
                             "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message =
        res.status == 404 ? "no route " + req.method + " " + req.path
        : res.status == 413
            ? fmt::format("the request body is larger than {} bytes (--max-body-bytes)",
                          options_.connections.framing.max_body_bytes)
        : res.status == 400 ? "bad request"
                            : "error " + std::to_string(res.status);
    send_json(res, res.status, error_body(ApiError(res.status, message)));
  });
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_json(res, 500, error_body(ApiError(500, what, "", "server_error")));
  });
  // Called once a response is written, for every request (also those refused before routing).
  http.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    ++metrics_.requests;
    if (res.status >= 400 && (res.status < 500 || res.status == 503)) ++metrics_.requests_rejected;
    if (res.status >= 500 && res.status != 503) ++metrics_.requests_failed;
  });
}

void Server::routes() {
  httplib::Server& http = *http_;
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (shutting_down_) {
      res.set_header("Retry-After", std::to_string(options_.connections.retry_after_seconds));
      send_json(res, 503, {{"status", "shutting down"}});
    } else {
      send_json(res, 200, {{"status", "ok"}});
    }
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(scheduler_->gauges()), "text/plain; version=0.0.4");
  });

  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const ModelConfig& c = model_.config();
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", options_.model_name},
                                      {"object", "model"},
                                      {"created", 0},
                                      {"owned_by", "sps"},
                                      {"family", c.family},
                                      {"context_length", options_.scheduler.context}}})}});
  });

  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const std::string text = parse_tokenize_request(req.body);
      json ids = json::array();
      for (uint32_t id : tokenizer_.encode(text)) ids.push_back(id);
      send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}});
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });

  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      std::vector<uint32_t> ids;
      for (int64_t id : parse_detokenize_request(req.body)) {
        if (id < 0 || id >= int64_t(tokenizer_.vocab_size()))
          throw ApiError(400, "'tokens': id " + std::to_string(id) + " is not a token (ids are in [0, " +
                                  std::to_string(tokenizer_.vocab_size()) + "))", "tokens");
        ids.push_back(uint32_t(id));
      }
      send_json(res, 200, {{"content", tokenizer_.decode(ids)}});
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });

  // Completions and chat completions share everything but their JSON shapes.
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    complete(req, res, false);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    complete(req, res, true);
  });
}

void Server::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
  std::shared_ptr<Prepared> p;
  try {
    p = prepare(req.body, chat);
    submit(*p);
  } catch (const ApiError& e) {
    send_error(res, e);
    return;
  }
  p->head = {(chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_), options_.model_name,
             int64_t(std::time(nullptr)), chat};
  if (p->request.stream)
    answer_stream(p, res);
  else
    answer_whole(*p, req, res);
}

std::shared_ptr<Server::Prepared> Server::prepare(const std::string& body, bool chat) const {
  auto p = std::make_shared<Prepared>();
  p->request = chat ? parse_chat_request(body) : parse_completion_request(body);
  const CompletionRequest& r = p->request;
  if (!r.model.empty() && r.model != options_.model_name)
    throw ApiError(400, "model '" + r.model + "' is not served here; this server serves '" +
                            options_.model_name + "'",
                   "model", "invalid_request_error", "model_not_found");
  if (r.n > options_.scheduler.rows)
    throw ApiError(400, "'n': at most " + std::to_string(options_.scheduler.rows) +
                            " choices (the server's --parallel rows)", "n");
  // Every prompt waits in the queue as one job: more than it holds could never be taken,
  // so this is no 503 to retry.
  if (int64_t(r.prompts.size()) > options_.scheduler.queue_limit)
    throw ApiError(400,
                   fmt::format("'prompt': {} prompts in one request; this server takes at most "
                               "{} (its --queue)",
                               r.prompts.size(), options_.scheduler.queue_limit),
                   "prompt");
  std::random_device entropy;
  const uint64_t seed = r.seed ? *r.seed : (uint64_t(entropy()) << 32) ^ entropy();
  for (const Prompt& prompt : r.prompts) {
    std::string text;
    p->jobs.push_back(make_job(prompt, r, seed, text));
    p->prompt_texts.push_back(std::move(text));
    p->prompt_tokens += int64_t(p->jobs.back()->prompt.size());
  }
  return p;
}

std::shared_ptr<Job> Server::make_job(const Prompt& prompt, const CompletionRequest& r,
                                      uint64_t seed, std::string& prompt_text) const {
  const ModelConfig& c = model_.config();
  const int64_t context = options_.scheduler.context;
  const int64_t max_prompt = std::min(context, c.block_size);
  auto job = std::make_shared<Job>();
  if (prompt.is_ids) {
    for (int64_t id : prompt.ids) {
      if (id < 0 || id >= int64_t(tokenizer_.vocab_size()))
        throw ApiError(400,
                       "'prompt': id " + std::to_string(id) + " is not a token (ids are in [0, " +
                           std::to_string(tokenizer_.vocab_size()) + "))",
                       "prompt");
      job->prompt.push_back(int32_t(id));
    }
    std::vector<uint32_t> ids(job->prompt.begin(), job->prompt.end());
    prompt_text = tokenizer_.decode(ids);
  } else {
    for (uint32_t id : tokenizer_.encode(prompt.text)) job->prompt.push_back(int32_t(id));
    prompt_text = prompt.text;
  }
  // An empty prompt starts a new document, as in `sps generate`.
  if (job->prompt.empty()) job->prompt.push_back(c.eos_token_id);
  const int64_t P = int64_t(job->prompt.size());
    if (P > max_prompt)
      throw ApiError(400, "the prompt is " + std::to_string(P) + " tokens; at most " +
                              std::to_string(max_prompt) + " fit the model's context",
                     "prompt", "invalid_request_error", "context_length_exceeded");
    job->max_tokens = r.max_tokens < 0 ? context - P : r.max_tokens;
    if (P + job->max_tokens > context)
      throw ApiError(400, "the prompt (" + std::to_string(P) + " tokens) plus max_tokens (" +
                              std::to_string(job->max_tokens) + ") is more than the context of " +
                              std::to_string(context) + " tokens",
                     "max_tokens", "invalid_request_error", "context_length_exceeded");
    job->n = r.n;
    job->stop = r.stop;
    job->logprobs = r.logprobs;
    job->score_prompt = r.echo && r.logprobs >= 0;
    job->stop_at_eos = !r.ignore_eos;
    SamplingOptions s;
    s.temperature = r.temperature;
    s.top_k = r.top_k;
    s.top_p = r.top_p;
    s.seed = seed;
    s.allowed_ids = tokenizer_.vocab_size();
    try {
      job->sampler = std::make_unique<TokenSampler>(s, c);
    } catch (const UserError& e) {
      throw ApiError(400, e.what());
    }
  return job;
}

void Server::submit(const Prepared& p) {
  if (shutting_down_) throw busy("the server is shutting down");
  if (!scheduler_->submit(p.jobs))
    throw busy(shutting_down_ ? "the server is shutting down" : "the queue is full; retry later");
}

void Server::send_error(httplib::Response& res, const ApiError& e) const {
  if (e.status == 503)
    res.set_header("Retry-After", std::to_string(options_.connections.retry_after_seconds));
  send_json(res, e.status, error_body(e));
}

void Server::answer_whole(const Prepared& p, const httplib::Request& req, httplib::Response& res) {
  const int64_t n = p.request.n;
  // Wait for every choice; a client that closes its connection meanwhile cancels the
  // jobs, which frees their rows at the next step.
  const ConnectionWatch connection(req.local_addr, req.local_port, req.remote_addr,
                                   req.remote_port);
  std::vector<ChoiceResult> choices(p.jobs.size() * n);
  std::vector<std::vector<TokenLogprob>> echo_tokens(p.jobs.size());
  bool cancelled = false, client_gone = false;
  for (size_t j = 0; j < p.jobs.size(); ++j) {
    while (true) {
      Job::Taken t = p.jobs[j]->take(std::chrono::milliseconds(100));
      if (!t.finished && !client_gone && connection.peer_closed()) {
        client_gone = true;
        cancel_all(p.jobs);
      }
      if (t.prompt_logprobs) echo_tokens[j] = std::move(*t.prompt_logprobs);
      for (ChoiceUpdate& u : t.updates) {
        ChoiceResult& choice = choices[j * n + u.choice];
        choice.text += u.text;
        choice.tokens.insert(choice.tokens.end(), u.tokens.begin(), u.tokens.end());
        if (u.finished) choice.finish = u.reason;
      }
      if (t.finished) {
        cancelled = cancelled || t.cancelled;
        break;
      }
    }
  }
  if (client_gone) return;  // nobody to answer
  if (cancelled) {
    send_error(res, busy("the server shut down before the completion finished"));
    return;
  }
  const bool echo = p.request.echo;
  send_json(res, 200,
            completion_response(p.head, tokenizer_, choices, p.request.logprobs,
                                echo ? p.prompt_texts : std::vector<std::string>{},
                                echo ? echo_tokens : std::vector<std::vector<TokenLogprob>>{},
                                n, p.prompt_tokens));
}

void Server::answer_stream(std::shared_ptr<Prepared> p, httplib::Response& res) {
  const int64_t n = p->request.n;
  // Server-sent events: one chunk per piece of text, then [DONE]. A failed write (the
  // client went away) cancels the jobs, which frees their rows at the next step.
  struct StreamState {
    std::vector<uint8_t> started, job_done;
    int64_t completion_tokens = 0;
  };
  auto state = std::make_shared<StreamState>();
  ++open_streams_;
  state->started.assign(p->jobs.size() * n, 0);
  state->job_done.assign(p->jobs.size(), 0);
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, p, state, n](size_t, httplib::DataSink& sink) {
        const auto send = [&](const json& chunk) {
          const std::string event = "data: " + dump(chunk) + "\n\n";
          return sink.write(event.data(), event.size());
        };
        bool all_done = true, waited = false;
        for (size_t j = 0; j < p->jobs.size(); ++j) {
          if (state->job_done[j]) continue;
          // Wait on the first unfinished job only, then collect from the others.
          Job::Taken t = p->jobs[j]->take(std::chrono::milliseconds(waited ? 0 : 100));
          waited = true;
          for (const ChoiceUpdate& u : t.updates) {
            const int64_t index = int64_t(j) * n + u.choice;
            state->completion_tokens += int64_t(u.tokens.size());
            const bool has_logprobs = p->request.logprobs >= 0;
            if (u.text.empty() && !u.finished && !has_logprobs && state->started[index]) continue;
            const json chunk = stream_chunk(p->head, tokenizer_, index, u.text, u.tokens,
                                            p->request.logprobs,
                                            u.finished ? std::optional(u.reason) : std::nullopt,
                                            !state->started[index]);
            state->started[index] = 1;
            if (!send(chunk)) {
              cancel_all(p->jobs);
              return false;
            }
          }
          if (t.finished)
            state->job_done[j] = 1;
          else
            all_done = false;
        }
        if (!all_done) return true;
        if (p->request.include_usage) {
          json chunk = {{"id", p->head.id},
                        {"object", p->head.chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", p->head.created},
                        {"model", p->head.model},
                        {"choices", json::array()},
                        {"usage", usage(p->prompt_tokens, state->completion_tokens)}};
          if (!send(chunk)) return false;
        }
        const std::string done = "data: [DONE]\n\n";
        if (!sink.write(done.data(), done.size())) return false;
        sink.done();
        return true;
      },
      [this, p](bool success) {
        if (!success) cancel_all(p->jobs);
        --open_streams_;
      });
}

}  // namespace sps::serve
