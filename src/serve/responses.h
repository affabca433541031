#pragma once
// The JSON shapes of OpenAI's answers: completion and chat completion objects, their
// streamed chunks, logprobs and usage.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infer/generator.h"
#include "serve/scheduler.h"
#include "tokenizer/bpe.h"

namespace sps::serve {

// What a choice has produced so far.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> tokens;
  std::optional<StopReason> finish;
};

struct ResponseHead {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

const char* finish_reason(StopReason reason);  // "stop" (EOS, stop string) | "length"
std::string token_text(const BpeTokenizer& tokenizer, int32_t id);

// Completions' logprobs object for `tokens` whose text starts at `offset` in the choice's text.
nlohmann::json completion_logprobs(const BpeTokenizer& tokenizer,
                                   const std::vector<TokenLogprob>& tokens, size_t offset,
                                   bool with_top);
// Chat's logprobs object ({"content": [...]}).
nlohmann::json chat_logprobs(const BpeTokenizer& tokenizer, const std::vector<TokenLogprob>& tokens);

nlohmann::json usage(int64_t prompt_tokens, int64_t completion_tokens);

// The whole (non-streamed) answer. `echo_prefix`: the prompt text and its scored tokens
// placed before each choice (completions' echo).
nlohmann::json completion_response(const ResponseHead& head, const BpeTokenizer& tokenizer,
                                   const std::vector<ChoiceResult>& choices, int64_t logprobs,
                                   const std::vector<std::string>& echo_text,
                                   const std::vector<std::vector<TokenLogprob>>& echo_tokens,
                                   int64_t choices_per_prompt, int64_t prompt_tokens);

// One streamed chunk for choice `index`: new text (and tokens), maybe a finish reason.
nlohmann::json stream_chunk(const ResponseHead& head, const BpeTokenizer& tokenizer, int64_t index,
                            const std::string& text, const std::vector<TokenLogprob>& tokens,
                            int64_t logprobs, std::optional<StopReason> finish, bool first);

// Serialised without failing on token bytes that are not UTF-8 (replaced by U+FFFD).
std::string dump(const nlohmann::json& j);

}  // namespace sps::serve
