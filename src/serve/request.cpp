#include "serve/request.h"

#include <cmath>
#include <limits>

namespace sps::serve {

using nlohmann::json;

ApiError::ApiError(int status, std::string message, std::string param, std::string type,
                   std::string code)
    : std::runtime_error(std::move(message)),
      status(status),
      type(std::move(type)),
      param(std::move(param)),
      code(std::move(code)) {}

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, "'" + param + "': " + message, param);
}

json parse_object(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

// A field that is absent or null keeps its default.
bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t get_int(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json& v = j[key];
  if (!v.is_number_integer()) throw bad(key, "expected an integer");
  int64_t x;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi)) throw bad(key, "must be at most " + std::to_string(hi));
    x = int64_t(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo || x > hi)
    throw bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

double get_number(const json& j, const char* key, double lo, double hi) {
  const json& v = j[key];
  if (!v.is_number()) throw bad(key, "expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

bool get_bool(const json& j, const char* key) {
  if (!j[key].is_boolean()) throw bad(key, "expected true or false");
  return j[key].get<bool>();
}

std::string get_string(const json& j, const char* key) {
  if (!j[key].is_string()) throw bad(key, "expected a string");
  return j[key].get<std::string>();
}

std::vector<int64_t> get_ids(const json& v, const char* key) {
  std::vector<int64_t> ids;
  for (const json& x : v) {
    if (!x.is_number_integer()) throw bad(key, "token ids must be integers");
    if (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw bad(key, "token id out of range");
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

// OpenAI's four prompt forms: a string, strings, ids, lists of ids.
std::vector<Prompt> get_prompts(const json& j) {
  if (!j.contains("prompt")) throw bad("prompt", "is required");
  const json& v = j["prompt"];
  std::vector<Prompt> prompts;
  if (v.is_string()) {
    prompts.push_back({false, v.get<std::string>(), {}});
  } else if (v.is_array() && !v.empty() && v[0].is_number()) {
    prompts.push_back({true, "", get_ids(v, "prompt")});
  } else if (v.is_array() && !v.empty()) {
    for (const json& p : v) {
      if (p.is_string())
        prompts.push_back({false, p.get<std::string>(), {}});
      else if (p.is_array())
        prompts.push_back({true, "", get_ids(p, "prompt")});
      else
        throw bad("prompt", "expected a string, strings, token ids or lists of token ids");
    }
  } else {
    throw bad("prompt", "expected a non-empty string, strings, token ids or lists of token ids");
  }
  return prompts;
}

// Fields OpenAI has that change results in ways this server does not implement: refused
// rather than silently ignored.
void refuse_unsupported(const json& j) {
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (has(j, key) && !(j[key].is_number() && j[key].get<double>() == 0))
      throw bad(key, "not supported (only 0)");
  if (has(j, "logit_bias") && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
    throw bad("logit_bias", "not supported");
  if (has(j, "suffix")) throw bad("suffix", "not supported");
  if (has(j, "best_of") && !(j["best_of"].is_number_integer() && j["best_of"].get<int64_t>() == 1))
    throw bad("best_of", "not supported (only 1)");
  if (has(j, "tools") || has(j, "functions")) throw bad("tools", "not supported");
}

// The fields completions and chat share.
void get_common(const json& j, CompletionRequest& r) {
  refuse_unsupported(j);
  if (has(j, "model")) r.model = get_string(j, "model");
  if (has(j, "temperature")) r.temperature = get_number(j, "temperature", 0, 100);
  if (has(j, "top_p")) r.top_p = get_number(j, "top_p", 0, 1);
  if (has(j, "top_p") && r.top_p == 0) throw bad("top_p", "must be > 0");
  if (has(j, "top_k")) {
    // -1 means off in vLLM and llama.cpp.
    const int64_t k = get_int(j, "top_k", -1, int64_t(1) << 31);
    r.top_k = k < 0 ? 0 : k;
  }
  if (has(j, "seed")) {
    if (!j["seed"].is_number_integer()) throw bad("seed", "expected an integer");
    r.seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>()
                                            : uint64_t(j["seed"].get<int64_t>());
  }
  if (has(j, "stop")) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 4) throw bad("stop", "at most 4 stop strings");
      for (const json& x : s) {
        if (!x.is_string()) throw bad("stop", "expected a string or strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      throw bad("stop", "expected a string or strings");
    }
  }
  if (has(j, "n")) r.n = get_int(j, "n", 1, 128);
  if (has(j, "stream")) r.stream = get_bool(j, "stream");
  if (has(j, "ignore_eos")) r.ignore_eos = get_bool(j, "ignore_eos");
  if (has(j, "stream_options")) {
    const json& o = j["stream_options"];
    if (!o.is_object()) throw bad("stream_options", "expected an object");
    if (has(o, "include_usage")) r.include_usage = get_bool(o, "include_usage");
  }
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body) {
  const json j = parse_object(body);
  CompletionRequest r;
  r.prompts = get_prompts(j);
  get_common(j, r);
  if (has(j, "max_tokens")) r.max_tokens = get_int(j, "max_tokens", 0, int64_t(1) << 31);
  if (has(j, "logprobs")) r.logprobs = get_int(j, "logprobs", 0, 20);
  if (has(j, "echo")) r.echo = get_bool(j, "echo");
  if (r.echo && r.stream) throw bad("echo", "not supported with stream");
  return r;
}

std::string chat_prompt(const std::vector<ChatMessage>& messages) {
  std::string text;
  for (const ChatMessage& m : messages) {
    const std::string role = m.role == "system"      ? "System"
                             : m.role == "assistant" ? "Assistant"
                                                     : "User";
    text += role + ": " + m.content + "\n\n";
  }
  return text + "Assistant:";
}

CompletionRequest parse_chat_request(std::string_view body) {
  const json j = parse_object(body);
  CompletionRequest r;
  r.chat = true;
  r.max_tokens = -1;
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
    throw bad("messages", "expected a non-empty array of messages");
  std::vector<ChatMessage> messages;
  for (const json& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad("messages", "each message needs a \"role\" string");
    ChatMessage message{m["role"].get<std::string>(), ""};
    if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
        message.role != "developer")
      throw bad("messages", "unknown role '" + message.role + "'");
    if (message.role == "developer") message.role = "system";
    const json& content = m.contains("content") ? m["content"] : json(nullptr);
    if (content.is_string()) {
      message.content = content.get<std::string>();
    } else if (content.is_array()) {
      // Content parts: only text parts are understood.
      for (const json& part : content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          throw bad("messages", "only text content parts are supported");
        message.content += part["text"].get<std::string>();
      }
    } else if (!content.is_null()) {
      throw bad("messages", "\"content\" must be a string or text parts");
    }
    messages.push_back(std::move(message));
  }
  r.prompts.push_back({false, chat_prompt(messages), {}});
  get_common(j, r);
  if (has(j, "max_completion_tokens"))
    r.max_tokens = get_int(j, "max_completion_tokens", 0, int64_t(1) << 31);
  if (has(j, "max_tokens")) r.max_tokens = get_int(j, "max_tokens", 0, int64_t(1) << 31);
  if (has(j, "logprobs") && get_bool(j, "logprobs")) r.logprobs = 0;
  if (has(j, "top_logprobs")) {
    if (r.logprobs < 0) throw bad("top_logprobs", "needs \"logprobs\": true");
    r.logprobs = get_int(j, "top_logprobs", 0, 20);
  }
  if (r.stop.size() >= 4) throw bad("stop", "at most 3 stop strings in chat (the template adds one)");
  r.stop.push_back(kChatTurnStop);
  return r;
}

std::string parse_tokenize_request(std::string_view body) {
  const json j = parse_object(body);
  for (const char* key : {"prompt", "content"})
    if (j.contains(key)) return get_string(j, key);
  throw bad("prompt", "is required");
}

std::vector<int64_t> parse_detokenize_request(std::string_view body) {
  const json j = parse_object(body);
  if (!j.contains("tokens") || !j["tokens"].is_array()) throw bad("tokens", "expected an array of ids");
  return get_ids(j["tokens"], "tokens");
}

}  // namespace sps::serve
