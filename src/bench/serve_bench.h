#pragma once
// `sps bench serve`: a bounded load generator for an OpenAI-style completions server — `sps
// serve` started in this process on a free loopback port, or any server at a URL (llama.cpp's
// llama-server, for one). `clients` threads, each with its own keep-alive connection, send
// `requests` streamed completions in all: a prompt of P token ids, greedy, max_tokens N with
// EOS ignored, so every request yields N tokens. Per request the client notes the time to the
// first streamed event and the mean gap between events after it (tokens N−1 over that span).
// Prints requests/s and output tokens/s over the wall time, and p50/p99 of both latencies.
// Asserts nothing about time.
#include <cstdint>
#include <string>
#include <vector>

namespace sps {

struct ServeLoadOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model;          // the request's "model" field; empty: left out
  int clients = 8;
  int64_t requests = 64;
  int64_t new_tokens = 128;   // N
  std::vector<std::vector<int32_t>> prompts;  // request i sends prompts[i % size]
};

struct ServeLoadResult {
  int64_t completed = 0, failed = 0;  // failed: an HTTP error, a broken stream or < N tokens
  std::string first_error;
  double seconds = 0;                 // wall time of the whole load
  std::vector<double> time_to_first_token, inter_token_latency;  // seconds, per completed request
};

ServeLoadResult run_serve_load(const ServeLoadOptions& options);

// One row of the report: label, requests/s, output tokens/s, p50/p99 of both latencies (ms).
void print_serve_load(const std::string& label, const ServeLoadOptions& options,
                      const ServeLoadResult& result, bool json);

}  // namespace sps
