#pragma once
// The server's counters and latency histograms, written as Prometheus text (GET /metrics).
// Counters are atomics; a histogram takes a short lock per observation. The gauges (queue
// length, active rows, KV bytes) are read from the scheduler when the text is written.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sps::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Prometheus lines of a histogram called `name` (no HELP/TYPE lines).
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct Gauges {
  int64_t queue_length = 0, active_rows = 0, rows = 0, kv_bytes_in_use = 0, kv_bytes_allocated = 0;
};

struct Metrics {
  std::atomic<uint64_t> requests{0};           // every HTTP request
  std::atomic<uint64_t> requests_rejected{0};  // 4xx and 503
  std::atomic<uint64_t> requests_failed{0};    // 5xx other than 503
  std::atomic<uint64_t> completions{0};        // completion requests that ran
  std::atomic<uint64_t> cancelled{0};          // stopped by a client disconnect or shutdown
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generated_tokens{0};
  std::atomic<uint64_t> decode_steps_during_prefill{0};  // a long prompt's forward paused
  std::atomic<uint64_t> connections_refused{0};  // past --max-connections or the per-client cap
  std::atomic<uint64_t> requests_timed_out{0};   // head or body late: answered 408, closed
  std::atomic<int64_t> connections_open{0};
  Histogram time_to_first_token;  // seconds from submission to a choice's first token
  Histogram inter_token_latency;  // seconds between a choice's consecutive tokens

  Metrics();
  std::string text(const Gauges& gauges) const;
};

}  // namespace sps::serve
