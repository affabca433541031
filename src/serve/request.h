#pragma once
// The JSON bodies of the OpenAI-style endpoints, parsed and checked without a model: what
// the server accepts, in OpenAI's field names, or an ApiError (HTTP status + OpenAI's error
// object) naming the field. Checks that need the model (context length, token ids, n
// against the rows) happen in the server (serve/server.cpp).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sps::serve {

// An error answered as {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "");
};

nlohmann::json error_body(const ApiError& e);

// A prompt as text or as token ids.
struct Prompt {
  bool is_ids = false;
  std::string text;
  std::vector<int64_t> ids;  // checked against the vocabulary later
};

struct CompletionRequest {
  std::string model;              // may be empty: the served model
  std::vector<Prompt> prompts;    // at least one
  int64_t max_tokens = 16;        // -1: the rest of the context (chat's default)
  double temperature = 1;         // OpenAI's default; 0 = greedy
  double top_p = 1;
  int64_t top_k = 0;              // 0: off (an extension, as vLLM and llama.cpp have)
  std::optional<uint64_t> seed;   // none: a random seed
  std::vector<std::string> stop;  // at most 4
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  int64_t logprobs = -1;          // -1: none; else the top alternatives per token (0..20)
  bool echo = false;
  bool ignore_eos = false;        // go on after EOS (a new document), as vLLM's ignore_eos
  bool chat = false;
};

struct ChatMessage {
  std::string role, content;
};

// POST /v1/completions.
CompletionRequest parse_completion_request(std::string_view body);
// POST /v1/chat/completions: the messages become one text prompt (chat_prompt) with the
// template's turn marker as an extra stop string.
CompletionRequest parse_chat_request(std::string_view body);

// The plain chat template (docs/serving.md): each message as "Role: content\n\n" (Role is
// System, User or Assistant), then "Assistant:" for the model to continue.
std::string chat_prompt(const std::vector<ChatMessage>& messages);
// Where a reply ends: the model starting the user's next turn.
inline constexpr const char* kChatTurnStop = "\nUser:";

// POST /tokenize {"prompt"|"content": TEXT} and POST /detokenize {"tokens": [ids]}.
std::string parse_tokenize_request(std::string_view body);
std::vector<int64_t> parse_detokenize_request(std::string_view body);

}  // namespace sps::serve
