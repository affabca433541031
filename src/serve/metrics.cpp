#include "serve/metrics.h"

#include <fmt/format.h>

namespace sps::serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard lock(mutex_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::text(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
  return out;
}

namespace {

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::string counter(const char* name, const char* help, uint64_t value) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, value);
}

std::string gauge(const char* name, const char* help, int64_t value) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, value);
}

std::string histogram(const char* name, const char* help, const Histogram& h) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help) + h.text(name);
}

}  // namespace

Metrics::Metrics() : time_to_first_token(latency_buckets()), inter_token_latency(latency_buckets()) {}

std::string Metrics::text(const Gauges& g) const {
  return counter("sps_requests_total", "HTTP requests received", requests) +
         counter("sps_requests_rejected_total", "requests answered 4xx or 503", requests_rejected) +
         counter("sps_requests_failed_total", "requests answered 500", requests_failed) +
         counter("sps_completions_total", "completion requests run", completions) +
         counter("sps_completions_cancelled_total",
                 "completions stopped by a client disconnect or shutdown", cancelled) +
         counter("sps_prompt_tokens_total", "prompt tokens prefilled", prompt_tokens) +
         counter("sps_generated_tokens_total", "tokens generated", generated_tokens) +
         counter("sps_decode_steps_during_prefill_total",
                 "decode steps run between the layers of a long prompt's prefill",
                 decode_steps_during_prefill) +
         counter("sps_connections_refused_total",
                 "connections refused past --max-connections or --max-connections-per-client",
                 connections_refused) +
         counter("sps_requests_timed_out_total",
                 "requests whose headers or body did not arrive within --timeout",
                 requests_timed_out) +
         gauge("sps_connections_open", "HTTP connections open", connections_open) +
         gauge("sps_queue_length", "completions waiting for decode rows", g.queue_length) +
         gauge("sps_active_rows", "decode rows in use", g.active_rows) +
         gauge("sps_rows", "decode rows (--parallel)", g.rows) +
         gauge("sps_kv_cache_bytes_in_use", "KV cache bytes holding tokens", g.kv_bytes_in_use) +
         gauge("sps_kv_cache_bytes_allocated", "KV cache bytes allocated", g.kv_bytes_allocated) +
         histogram("sps_time_to_first_token_seconds",
                   "from a completion's arrival to each choice's first token",
                   time_to_first_token) +
         histogram("sps_inter_token_latency_seconds", "between consecutive tokens of a choice",
                   inter_token_latency);
}

}  // namespace sps::serve
