#include "serve/responses.h"

namespace sps::serve {

using nlohmann::json;

const char* finish_reason(StopReason reason) {
  return reason == StopReason::length ? "length" : "stop";
}

std::string token_text(const BpeTokenizer& tokenizer, int32_t id) {
  const uint32_t u = uint32_t(id);
  return tokenizer.decode({&u, 1});
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json completion_logprobs(const BpeTokenizer& tokenizer, const std::vector<TokenLogprob>& tokens,
                         size_t offset, bool with_top) {
  json texts = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const TokenLogprob& t = tokens[i];
    const std::string text = token_text(tokenizer, t.id);
    texts.push_back(text);
    logprobs.push_back(t.logprob);
    if (with_top) {
      json top = json::object();
      for (const auto& [id, lp] : t.top) top[token_text(tokenizer, id)] = lp;
      tops.push_back(top);
    }
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", texts},
          {"token_logprobs", logprobs},
          {"top_logprobs", with_top ? tops : json(nullptr)},
          {"text_offset", offsets}};
}

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

}  // namespace

json chat_logprobs(const BpeTokenizer& tokenizer, const std::vector<TokenLogprob>& tokens) {
  json content = json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string text = token_text(tokenizer, t.id);
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string alt = token_text(tokenizer, id);
      top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes_of(alt)}});
    }
    content.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_response(const ResponseHead& head, const BpeTokenizer& tokenizer,
                         const std::vector<ChoiceResult>& choices, int64_t logprobs,
                         const std::vector<std::string>& echo_text,
                         const std::vector<std::vector<TokenLogprob>>& echo_tokens,
                         int64_t choices_per_prompt, int64_t prompt_tokens) {
  json list = json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    completion_tokens += int64_t(c.tokens.size());
    const size_t prompt = i / size_t(choices_per_prompt);
    const std::string prefix = echo_text.empty() ? "" : echo_text[prompt];
    json choice = {{"index", i}, {"logprobs", nullptr}};
    choice["finish_reason"] = c.finish ? json(finish_reason(*c.finish)) : json("length");
    if (head.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (logprobs >= 0) choice["logprobs"] = chat_logprobs(tokenizer, c.tokens);
    } else {
      choice["text"] = prefix + c.text;
      if (logprobs >= 0) {
        std::vector<TokenLogprob> all = echo_tokens.empty() ? std::vector<TokenLogprob>{} : echo_tokens[prompt];
        all.insert(all.end(), c.tokens.begin(), c.tokens.end());
        choice["logprobs"] = completion_logprobs(tokenizer, all, 0, logprobs > 0);
      }
    }
    list.push_back(choice);
  }
  return {{"id", head.id},
          {"object", head.chat ? "chat.completion" : "text_completion"},
          {"created", head.created},
          {"model", head.model},
          {"choices", list},
          {"usage", usage(prompt_tokens, completion_tokens)}};
}

json stream_chunk(const ResponseHead& head, const BpeTokenizer& tokenizer, int64_t index,
                  const std::string& text, const std::vector<TokenLogprob>& tokens,
                  int64_t logprobs, std::optional<StopReason> finish, bool first) {
  json choice = {{"index", index}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish ? json(finish_reason(*finish)) : json(nullptr);
  if (head.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !finish) delta["content"] = text;
    choice["delta"] = delta;
    if (logprobs >= 0 && !tokens.empty()) choice["logprobs"] = chat_logprobs(tokenizer, tokens);
  } else {
    choice["text"] = text;
    if (logprobs >= 0 && !tokens.empty())
      choice["logprobs"] = completion_logprobs(tokenizer, tokens, 0, logprobs > 0);
  }
  return {{"id", head.id},
          {"object", head.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", head.created},
          {"model", head.model},
          {"choices", json::array({choice})}};
}

}  // namespace sps::serve
