// The request parser: OpenAI's fields and prompt forms, defaults, and every malformed body
// as a 400 ApiError naming the field (never a crash).
#include <gtest/gtest.h>

#include "serve/request.h"

namespace sps::serve {
namespace {

int status_of(const std::string& body, bool chat = false) {
  try {
    chat ? parse_chat_request(body) : parse_completion_request(body);
  } catch (const ApiError& e) {
    return e.status;
  }
  return 200;
}

std::string param_of(const std::string& body) {
  try {
    parse_completion_request(body);
  } catch (const ApiError& e) {
    return e.param;
  }
  return "";
}

TEST(ServeRequest, ReadsEveryCompletionField) {
  const CompletionRequest r = parse_completion_request(
      R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":3,
          "seed":11,"stop":["a","b"],"n":2,"stream":true,"logprobs":3,"echo":false,
          "stream_options":{"include_usage":true}})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 3);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, 11u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 3);
}

TEST(ServeRequest, DefaultsAreOpenAIs) {
  const CompletionRequest r = parse_completion_request(R"({"prompt":"x"})");
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_DOUBLE_EQ(r.temperature, 1);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.logprobs, -1);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.stream);
  // Nulls keep the defaults; top_k -1 means off.
  const CompletionRequest n = parse_completion_request(R"({"prompt":"x","max_tokens":null,"top_k":-1})");
  EXPECT_EQ(n.max_tokens, 16);
  EXPECT_EQ(n.top_k, 0);
}

TEST(ServeRequest, FourPromptForms) {
  EXPECT_EQ(parse_completion_request(R"({"prompt":["a","bc"]})").prompts.size(), 2u);
  const auto ids = parse_completion_request(R"({"prompt":[1,2,3]})").prompts;
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_TRUE(ids[0].is_ids);
  EXPECT_EQ(ids[0].ids, (std::vector<int64_t>{1, 2, 3}));
  const auto lists = parse_completion_request(R"({"prompt":[[1],[2,3],"x"]})").prompts;
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[1].ids, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(lists[2].is_ids);
}

TEST(ServeRequest, MalformedBodiesAre400NamingTheField) {
  EXPECT_EQ(status_of("{"), 400);
  EXPECT_EQ(status_of("[]"), 400);
  EXPECT_EQ(status_of(""), 400);
  EXPECT_EQ(status_of("{}"), 400);
  EXPECT_EQ(param_of("{}"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":5})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":[]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":[1,"a"]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":[1.5]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":"x","max_tokens":"3"})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt":"x","max_tokens":-1})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt":"x","max_tokens":1e30})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt":"x","temperature":-1})"), "temperature");
  EXPECT_EQ(param_of(R"({"prompt":"x","temperature":"hot"})"), "temperature");
  EXPECT_EQ(param_of(R"({"prompt":"x","top_p":0})"), "top_p");
  EXPECT_EQ(param_of(R"({"prompt":"x","top_p":1.5})"), "top_p");
  EXPECT_EQ(param_of(R"({"prompt":"x","n":0})"), "n");
  EXPECT_EQ(param_of(R"({"prompt":"x","stop":[1]})"), "stop");
  EXPECT_EQ(param_of(R"({"prompt":"x","stop":["a","b","c","d","e"]})"), "stop");
  EXPECT_EQ(param_of(R"({"prompt":"x","logprobs":21})"), "logprobs");
  EXPECT_EQ(param_of(R"({"prompt":"x","stream":"yes"})"), "stream");
  EXPECT_EQ(param_of(R"({"prompt":"x","seed":"1"})"), "seed");
  EXPECT_EQ(param_of(R"({"prompt":"x","echo":true,"stream":true})"), "echo");
  EXPECT_EQ(param_of(R"({"prompt":"x","model":3})"), "model");
  EXPECT_EQ(param_of(R"({"prompt":"x","presence_penalty":0.5})"), "presence_penalty");
  EXPECT_EQ(param_of(R"({"prompt":"x","best_of":3})"), "best_of");
  // Unknown fields are ignored, as OpenAI clients send many.
  EXPECT_EQ(status_of(R"({"prompt":"x","user":"u","frequency_penalty":0})"), 200);
}

TEST(ServeRequest, ChatUsesThePlainTemplate) {
  const CompletionRequest r = parse_chat_request(
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},
                      {"role":"assistant","content":"Hello."},{"role":"user","content":[{"type":"text","text":"Bye"}]}],
          "max_tokens":5,"stop":"!"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text,
            "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello.\n\nUser: Bye\n\nAssistant:");
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"!", kChatTurnStop}));
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})").max_tokens, -1);
  EXPECT_EQ(status_of(R"({"messages":[]})", true), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"content":"x"}]})", true), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"role":"wizard","content":"x"}]})", true), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"role":"user","content":5}]})", true), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", true), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", true), 400);
}

TEST(ServeRequest, TokenizeAndDetokenizeBodies) {
  EXPECT_EQ(parse_tokenize_request(R"({"prompt":"ab"})"), "ab");
  EXPECT_EQ(parse_tokenize_request(R"({"content":"cd"})"), "cd");
  EXPECT_EQ(parse_detokenize_request(R"({"tokens":[1,2]})"), (std::vector<int64_t>{1, 2}));
  EXPECT_THROW(parse_tokenize_request(R"({"prompt":1})"), ApiError);
  EXPECT_THROW(parse_detokenize_request(R"({"tokens":"1"})"), ApiError);
}

TEST(ServeRequest, ErrorBodyIsOpenAIs) {
  const auto j = error_body(ApiError(400, "bad", "n"));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "n");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

}  // namespace
}  // namespace sps::serve
