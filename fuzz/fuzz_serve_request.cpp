// libFuzzer target: the request parser of `sps serve` (completions, chat, tokenize,
// detokenize bodies) on arbitrary bytes. An ApiError with a 4xx status is the expected
// answer to bad input; any crash, sanitizer report or other exception is a bug, and so is a
// parsed request that breaks what the parser promises (the server relies on these).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "serve/request.h"

namespace {

void check(const sps::serve::CompletionRequest& r) {
  if (r.prompts.empty()) __builtin_trap();
  if (r.n < 1 || r.n > 128) __builtin_trap();
  if (r.max_tokens < -1 || (!r.chat && r.max_tokens < 0)) __builtin_trap();
  if (!(r.temperature >= 0) || !(r.top_p > 0 && r.top_p <= 1) || r.top_k < 0) __builtin_trap();
  if (r.logprobs < -1 || r.logprobs > 20) __builtin_trap();
  if (r.stop.size() > 4) __builtin_trap();
  if (r.echo && r.stream) __builtin_trap();
}

template <typename F>
void expect_api_errors_only(F&& parse) {
  try {
    parse();
  } catch (const sps::serve::ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  expect_api_errors_only([&] { check(sps::serve::parse_completion_request(body)); });
  expect_api_errors_only([&] { check(sps::serve::parse_chat_request(body)); });
  expect_api_errors_only([&] { sps::serve::parse_tokenize_request(body); });
  expect_api_errors_only([&] { sps::serve::parse_detokenize_request(body); });
  return 0;
}
