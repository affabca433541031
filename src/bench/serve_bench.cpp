#include "bench/serve_bench.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "util/process_stats.h"

namespace sps {
namespace {

// What one streamed completion showed: when its first and last events arrived, and how it
// finished.
struct StreamTiming {
  double first_event = -1, last_event = -1;
  std::string finish_reason, error;
};

// Reads server-sent events as they arrive: "data: {json}" blocks separated by blank lines,
// ending with "data: [DONE]".
class EventReader {
 public:
  explicit EventReader(StreamTiming& timing) : timing_(timing) {}
  void feed(const char* data, size_t n) {
    buffer_.append(data, n);
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      event(buffer_.substr(0, end));
      buffer_.erase(0, end + 2);
    }
  }

 private:
  void event(const std::string& block) {
    if (block.rfind("data: ", 0) != 0) return;
    const std::string payload = block.substr(6);
    if (payload == "[DONE]") return;
    const nlohmann::json j = nlohmann::json::parse(payload, nullptr, false);
    if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) {
      if (timing_.error.empty()) timing_.error = "an event that is not a completion chunk: " + payload.substr(0, 200);
      return;
    }
    const double now = now_seconds();
    if (timing_.first_event < 0) timing_.first_event = now;
    timing_.last_event = now;
    const nlohmann::json& reason = j["choices"][0]["finish_reason"];
    if (reason.is_string()) timing_.finish_reason = reason.get<std::string>();
  }

  StreamTiming& timing_;
  std::string buffer_;
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = size_t(std::ceil(p * double(values.size()))) - 1;
  return values[std::min(i, values.size() - 1)];
}

}  // namespace

ServeLoadResult run_serve_load(const ServeLoadOptions& o) {
  ServeLoadResult result;
  std::mutex mutex;
  std::atomic<int64_t> next{0};
  const auto client = [&] {
    httplib::Client http(o.host, o.port);
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);
    http.set_read_timeout(600, 0);
    for (int64_t i; (i = next++) < o.requests;) {
      nlohmann::json body = {{"prompt", o.prompts[size_t(i) % o.prompts.size()]},
                             {"max_tokens", o.new_tokens},
                             {"temperature", 0},
                             {"stream", true},
                             {"ignore_eos", true}};
      if (!o.model.empty()) body["model"] = o.model;
      httplib::Request request;
      request.method = "POST";
      request.path = "/v1/completions";
      request.set_header("Content-Type", "application/json");
      request.body = body.dump();
      StreamTiming timing;
      EventReader reader(timing);
      request.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        reader.feed(data, n);
        return true;
      };
      const double sent = now_seconds();
      const httplib::Result response = http.send(request);
      std::string error = timing.error;
      if (!response)
        error = "no response: " + httplib::to_string(response.error());
      else if (response->status != 200)
        error = fmt::format("HTTP {}", response->status);
      else if (timing.finish_reason != "length")
        error = "finished by '" + timing.finish_reason + "' before max_tokens";
      std::lock_guard lock(mutex);
      if (!error.empty()) {
        ++result.failed;
        if (result.first_error.empty()) result.first_error = error;
        continue;
      }
      ++result.completed;
      result.time_to_first_token.push_back(timing.first_event - sent);
      if (o.new_tokens > 1)
        result.inter_token_latency.push_back((timing.last_event - timing.first_event) /
                                             double(o.new_tokens - 1));
    }
  };
  const double t0 = now_seconds();
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  result.seconds = now_seconds() - t0;
  return result;
}

void print_serve_load(const std::string& label, const ServeLoadOptions& o, const ServeLoadResult& r,
                      bool json) {
  const double requests_per_second = double(r.completed) / r.seconds;
  const double tokens_per_second = double(r.completed * o.new_tokens) / r.seconds;
  const auto ms = [](double seconds) { return 1e3 * seconds; };
  if (json) {
    const nlohmann::json j = {
        {"server", label}, {"clients", o.clients}, {"requests", o.requests},
        {"prompt_tokens", o.prompts.empty() ? 0 : o.prompts.front().size()},
        {"new_tokens", o.new_tokens}, {"completed", r.completed}, {"failed", r.failed},
        {"seconds", r.seconds}, {"requests_per_second", requests_per_second},
        {"output_tokens_per_second", tokens_per_second},
        {"time_to_first_token_p50_ms", ms(percentile(r.time_to_first_token, 0.5))},
        {"time_to_first_token_p99_ms", ms(percentile(r.time_to_first_token, 0.99))},
        {"inter_token_latency_p50_ms", ms(percentile(r.inter_token_latency, 0.5))},
        {"inter_token_latency_p99_ms", ms(percentile(r.inter_token_latency, 0.99))}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{:<22} {:>9} {:>7} {:>10.2f} {:>10.1f} {:>10.0f} {:>10.0f} {:>9.1f} {:>9.1f}\n",
               label, r.completed, r.failed, requests_per_second, tokens_per_second,
               ms(percentile(r.time_to_first_token, 0.5)), ms(percentile(r.time_to_first_token, 0.99)),
               ms(percentile(r.inter_token_latency, 0.5)), ms(percentile(r.inter_token_latency, 0.99)));
  }
  if (r.failed > 0) fmt::print(stderr, "{}: {} request(s) failed; the first: {}\n", label, r.failed, r.first_error);
  std::fflush(stdout);
}

}  // namespace sps
