// The HTTP server in this process on a free loopback port: completions (plain, streamed,
// n > 1, stop strings, logprobs, echo scoring), chat, the other routes, auth, limits, bad
// requests in OpenAI's error shape, queue-full 503, cancellation on disconnect (streamed or not).
#include <gtest/gtest.h>

#include <cctype>
#include <thread>

#include "eval/scoring.h"
#include "serve/request.h"
#include "serve/server.h"
#include "serve_fixtures.h"
#include "util/error.h"

namespace sps::testing {
namespace {

using nlohmann::json;

// The events of a server-sent stream, without "data: " and the blank lines.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    events.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return events;
}

void expect_error(const json& body, int status, int expected, const std::string& param = "") {
  EXPECT_EQ(status, expected) << body.dump();
  ASSERT_TRUE(body.is_object() && body.contains("error")) << body.dump();
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"]["type"].is_string());
  if (!param.empty()) {
    EXPECT_EQ(body["error"]["param"], param) << body.dump();
  }
}

void expect_post_error(httplib::Client& c, const std::string& path, const json& body, int expected,
                       const std::string& param = "") {
  int status = 0;
  const json j = post_json(c, path, body, &status);
  expect_error(j, status, expected, param);
}

class ServerFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(ServerFamily, ConcurrentCompletionsEqualGeneratingEachAlone) {
  ServeModel m(GetParam());
  LiveServer live(*m.model, small_server(4));
  struct Case {
    std::string prompt;
    int64_t max_tokens;
    double temperature;
    uint64_t seed;
    bool stream;
  };
  const std::vector<Case> cases = {{"Hello there", 24, 0.8, 1, false}, {"x", 5, 0, 0, true},
                                   {"A much longer prompt than the rest", 12, 1.2, 7, false},
                                   {"mid size", 30, 1.0, 3, true}, {"z", 17, 0.6, 11, false},
                                   {"two words", 9, 0, 0, false}};
  std::vector<std::string> texts(cases.size());
  std::vector<int64_t> counts(cases.size(), -1);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < cases.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c = live.client();
      const Case& k = cases[i];
      const json body = {{"prompt", k.prompt}, {"max_tokens", k.max_tokens},
                         {"temperature", k.temperature}, {"seed", k.seed}, {"stream", k.stream},
                         {"stream_options", {{"include_usage", true}}}};
      auto res = c.Post("/v1/completions", body.dump(), "application/json");
      if (!res || res->status != 200) return;
      if (!k.stream) {
        const json j = json::parse(res->body);
        texts[i] = j["choices"][0]["text"];
        counts[i] = j["usage"]["completion_tokens"];
      } else {
        const auto events = sse_events(res->body);
        if (events.empty() || events.back() != "[DONE]") return;
        for (size_t e = 0; e + 1 < events.size(); ++e) {
          const json j = json::parse(events[e]);
          if (!j["choices"].empty()) texts[i] += j["choices"][0]["text"].get<std::string>();
          if (j.contains("usage")) counts[i] = j["usage"]["completion_tokens"];
        }
      }
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    const Generation want = m.generate(byte_ids(k.prompt), k.max_tokens, k.temperature, 0, k.seed);
    EXPECT_EQ(texts[i], as_json_text(want.text)) << "request " << i;
    EXPECT_EQ(counts[i], int64_t(want.tokens.size())) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ServerFamily, ::testing::Values("standard", "sps"));

TEST(Server, CompletionShapeStopChoicesAndLogprobs) {
  // A model whose greedy text holds a stop string of printable ASCII (the same in JSON).
  std::unique_ptr<ServeModel> model;
  Generation greedy;
  std::string stop;
  for (uint64_t seed = 1; seed < 64 && stop.empty(); ++seed) {
    model = std::make_unique<ServeModel>("sps", seed);
    greedy = model->generate(byte_ids("abc"), 20, 0, 0, 0);
    for (size_t i = 1; i + 1 < greedy.text.size() && stop.empty(); ++i)
      if (std::isprint(uint8_t(greedy.text[i])) && std::isprint(uint8_t(greedy.text[i + 1])))
        stop = greedy.text.substr(i, 2);
  }
  ASSERT_FALSE(stop.empty());
  ServeModel& m = *model;
  LiveServer live(*m.model, small_server(4));
  httplib::Client c = live.client();
  int status = 0;
  json j = post_json(c, "/v1/completions",
                     {{"model", "micro"}, {"prompt", "abc"}, {"max_tokens", 20}, {"temperature", 0},
                      {"stop", stop}, {"logprobs", 2}},
                     &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "micro");
  EXPECT_TRUE(j["id"].is_string());
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["text"], as_json_text(m.generate(byte_ids("abc"), 20, 0, 0, 0, {stop}).text));
  EXPECT_EQ(choice["finish_reason"], "stop");
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), j["usage"]["completion_tokens"].get<size_t>());
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0);
    // Alternatives are keyed by text: two ids whose bytes are not UTF-8 may share a key.
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 3 + j["usage"]["completion_tokens"].get<int>());

  // n = 3 and two prompts: six choices indexed prompt-major; max_tokens reached is "length".
  j = post_json(c, "/v1/completions",
                {{"prompt", {"one", "two"}}, {"max_tokens", 4}, {"n", 3}, {"seed", 5}, {"temperature", 1.5}},
                &status);
  ASSERT_EQ(status, 200) << j.dump();
  ASSERT_EQ(j["choices"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["choices"][0]["text"], as_json_text(m.generate(byte_ids("one"), 4, 1.5, 0, 5).text));
  EXPECT_EQ(j["choices"][3]["text"], as_json_text(m.generate(byte_ids("two"), 4, 1.5, 0, 5).text));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);

  // Token-id prompts work like their text.
  json by_ids = post_json(c, "/v1/completions",
                          {{"prompt", byte_ids("abc")}, {"max_tokens", 20}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(by_ids["choices"][0]["text"], as_json_text(greedy.text));
}

// lm-evaluation-harness's local-completions scoring request.
TEST(Server, EchoWithNoTokensScoresThePrompt) {
  ServeModel m("standard");
  LiveServer live(*m.model, small_server(2));
  httplib::Client c = live.client();
  int status = 0;
  const json j = post_json(c, "/v1/completions",
                           {{"prompt", "The quick fox"}, {"max_tokens", 0}, {"echo", true},
                            {"logprobs", 1}, {"temperature", 0}},
                           &status);
  ASSERT_EQ(status, 200) << j.dump();
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["text"], "The quick fox");
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 13u);
  EXPECT_EQ(lp["tokens"][4], "q");
  EXPECT_EQ(lp["text_offset"][4], 4);
  eval::Request whole;
  whole.continuation = byte_ids("The quick fox");
  const double want = eval::score_requests(*m.reference, {whole}, 1)[0].loglik;
  double sum = 0;
  for (const json& x : lp["token_logprobs"]) sum += x.get<double>();
  EXPECT_NEAR(sum, want, 1e-3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
}

TEST(Server, ChatCompletionPlainAndStreamed) {
  ServeModel m("sps");
  LiveServer live(*m.model, small_server(2));
  httplib::Client c = live.client();
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const std::string prompt = serve::chat_prompt({{"user", "Hi"}});
  int status = 0;
  const json j = post_json(c, "/v1/chat/completions",
                           {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const Generation want = m.generate(byte_ids(prompt), 6, 0, 0, 0, {serve::kChatTurnStop});
  EXPECT_EQ(j["choices"][0]["message"]["content"], as_json_text(want.text));

  auto res = c.Post("/v1/chat/completions",
                    json({{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}}).dump(),
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto events = sse_events(res->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t e = 0; e + 1 < events.size(); ++e) {
    const json chunk = json::parse(events[e]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const json& delta = chunk["choices"][0]["delta"];
    if (e == 0) {
      EXPECT_EQ(delta["role"], "assistant");
    }
    if (delta.contains("content")) text += delta["content"].get<std::string>();
  }
  EXPECT_EQ(text, as_json_text(want.text));
  EXPECT_FALSE(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"].is_null());
}

TEST(Server, ModelsHealthMetricsTokenize) {
  ServeModel m("standard");
  LiveServer live(*m.model, small_server(2));
  httplib::Client c = live.client();
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["id"], "micro");
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  int status = 0;
  const json tokens = post_json(c, "/tokenize", {{"prompt", "hey"}}, &status);
  EXPECT_EQ(tokens["tokens"], json(byte_ids("hey")));
  const json text = post_json(c, "/detokenize", {{"tokens", byte_ids("hey")}}, &status);
  EXPECT_EQ(text["content"], "hey");
  expect_post_error(c, "/detokenize", {{"tokens", {9999}}}, 400, "tokens");
  post_json(c, "/v1/completions", {{"prompt", "abcd"}, {"max_tokens", 3}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  const std::string& t = metrics->body;
  EXPECT_NE(t.find("sps_prompt_tokens_total 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("sps_completions_total 1\n"), std::string::npos);
  EXPECT_NE(t.find("sps_time_to_first_token_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(t.find("sps_queue_length 0\n"), std::string::npos);
  EXPECT_NE(t.find("sps_kv_cache_bytes_in_use"), std::string::npos);
  EXPECT_NE(t.find("# TYPE sps_inter_token_latency_seconds histogram"), std::string::npos);
}

TEST(Server, BadRequestsAreOpenAIErrors) {
  ServeModel m("standard");
  serve::ServerOptions o = small_server(2);
  o.connections.framing.max_body_bytes = 4096;
  LiveServer live(*m.model, o);
  httplib::Client c = live.client();
  int status = 0;
  auto raw = c.Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(raw);
  expect_error(json::parse(raw->body), raw->status, 400);
  expect_post_error(c, "/v1/completions", {{"prompt", 3}}, 400, "prompt");
  expect_post_error(c, "/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}, 400, "model");
  expect_post_error(c, "/v1/completions", {{"prompt", "x"}, {"n", 3}}, 400, "n");
  expect_post_error(c, "/v1/completions", {{"prompt", {1, 300}}}, 400, "prompt");
  // The context is 48 tokens: a 49-token prompt, or prompt + max_tokens past it.
  expect_post_error(c, "/v1/completions", {{"prompt", std::string(49, 'a')}}, 400, "prompt");
  expect_post_error(c, "/v1/completions", {{"prompt", std::string(40, 'a')}, {"max_tokens", 9}}, 400, "max_tokens");
  post_json(c, "/v1/completions", {{"prompt", std::string(40, 'a')}, {"max_tokens", 8}, {"temperature", 0}}, &status);
  EXPECT_EQ(status, 200);
  auto big = c.Post("/v1/completions", json({{"prompt", std::string(5000, 'a')}}).dump(), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  expect_error(json::parse(missing->body), missing->status, 404);
}

TEST(Server, ApiKeyIsRequiredWhenSet) {
  ServeModel m("standard");
  serve::ServerOptions o = small_server(2);
  o.api_key = "s3cret";
  LiveServer live(*m.model, o);
  httplib::Client c = live.client();
  auto none = c.Get("/v1/models");
  ASSERT_TRUE(none);
  expect_error(json::parse(none->body), none->status, 401);
  auto wrong = c.Get("/v1/models", {{"Authorization", "Bearer s3cres"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto longer = c.Get("/v1/models", {{"Authorization", "Bearer s3cret1"}});
  ASSERT_TRUE(longer);
  EXPECT_EQ(longer->status, 401);
  auto right = c.Get("/v1/models", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  auto health = c.Get("/health");  // for load balancers, without the key
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(serve::constant_time_equal("abc", "abc"));
  EXPECT_FALSE(serve::constant_time_equal("abd", "abc"));
  EXPECT_FALSE(serve::constant_time_equal("", "abc"));
  EXPECT_FALSE(serve::constant_time_equal("abcabc", "abc"));
}

// A context far past the micro model's block_size makes requests long enough to overlap.
serve::ServerOptions long_rows(int64_t rows, int64_t queue) {
  serve::ServerOptions o = small_server(rows, queue);
  o.scheduler.context = 200000;
  return o;
}

int64_t metric(httplib::Client& c, const std::string& name) {
  auto res = c.Get("/metrics");
  if (!res) return -1;
  const size_t at = res->body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(res->body.substr(at + name.size() + 2));
}

TEST(Server, FullQueueIs503WithRetryAfter) {
  ServeModel m("standard");
  LiveServer live(*m.model, long_rows(1, 1));
  // One long streamed request holds the row, a second waits in the queue; the third is refused.
  httplib::Client c = live.client();
  std::vector<std::thread> holders;
  const auto wait_for = [&](const std::string& gauge, int64_t value) {
    for (int k = 0; k < 500 && metric(c, gauge) != value; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(metric(c, gauge), value) << gauge;
  };
  for (int i = 0; i < 2; ++i) {
    holders.emplace_back([&] {
      httplib::Client h = live.client();
      h.Post("/v1/completions",
             json({{"prompt", "a"}, {"max_tokens", 199000}, {"stream", true}, {"ignore_eos", true}}).dump(),
             "application/json");
    });
    wait_for(i == 0 ? "sps_active_rows" : "sps_queue_length", 1);
  }
  auto res = c.Post("/v1/completions", json({{"prompt", "b"}, {"max_tokens", 1}}).dump(), "application/json");
  EXPECT_TRUE(res);
  if (res) {
    EXPECT_EQ(res->status, 503);
    EXPECT_EQ(res->get_header_value("Retry-After"), "1");
    expect_error(json::parse(res->body), res->status, 503);
  }
  live.stop(std::chrono::milliseconds(0));  // cancels both; their streams end
  for (auto& t : holders) t.join();
}

// A request of more prompts than the whole queue holds could never be taken: a 400 that says
// the limit, not a 503 to retry forever. Up to the queue's size is served.
TEST(Server, MorePromptsThanTheQueueHoldsIs400) {
  ServeModel m("standard");
  LiveServer live(*m.model, small_server(2, /*queue=*/3));
  httplib::Client c = live.client();
  int status = 0;
  const json error = post_json(c, "/v1/completions",
                               {{"prompt", {"a", "b", "c", "d"}}, {"max_tokens", 1}}, &status);
  expect_error(error, status, 400, "prompt");
  EXPECT_EQ(error["error"]["message"],
            "'prompt': 4 prompts in one request; this server takes at most 3 (its --queue)");
  const json done =
      post_json(c, "/v1/completions", {{"prompt", {"a", "b", "c"}}, {"max_tokens", 1}}, &status);
  EXPECT_EQ(status, 200) << done.dump();
  EXPECT_EQ(done["choices"].size(), 3u);
}

// Every 503 says when to retry: a completion refused while the server drains, and /health.
TEST(Server, ShutdownAnswersCarryRetryAfter) {
  ServeModel m("standard");
  LiveServer live(*m.model, long_rows(1, 4));
  std::thread holder([&] {  // holds the row, so the drain lasts its grace
    httplib::Client h = live.client();
    h.Post("/v1/completions",
           json({{"prompt", "a"}, {"max_tokens", 199000}, {"stream", true}, {"ignore_eos", true}})
               .dump(),
           "application/json");
  });
  httplib::Client c = live.client();
  for (int k = 0; k < 500 && metric(c, "sps_active_rows") != 1; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::thread stopper([&] { live.server->shutdown(std::chrono::milliseconds(1500)); });
  std::shared_ptr<httplib::Response> health;
  for (int k = 0; k < 500; ++k) {
    auto res = c.Get("/health");
    if (res && res->status == 503) {
      health = std::make_shared<httplib::Response>(*res);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(health);
  EXPECT_EQ(health->get_header_value("Retry-After"), "1");
  auto refused = c.Post("/v1/completions", json({{"prompt", "b"}, {"max_tokens", 1}}).dump(),
                        "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  expect_error(json::parse(refused->body), refused->status, 503);
  stopper.join();
  live.stop(std::chrono::milliseconds(0));
  holder.join();
}

// The KV bytes in use follow the live rows: above zero while a request decodes, zero once
// the server is idle again (not the last request's bytes).
TEST(Server, KvCacheBytesInUseIsZeroWhenIdle) {
  ServeModel m("sps");
  LiveServer live(*m.model, long_rows(2, 4));
  httplib::Client c = live.client();
  std::thread holder([&] {
    httplib::Client h = live.client();
    h.Post("/v1/completions",
           json({{"prompt", "abc"}, {"max_tokens", 2000}, {"stream", true}, {"ignore_eos", true}})
               .dump(),
           "application/json");
  });
  int64_t busy = 0;
  for (int k = 0; k < 500 && busy <= 0; ++k) {
    if (metric(c, "sps_active_rows") == 1) busy = metric(c, "sps_kv_cache_bytes_in_use");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(busy, 0);
  holder.join();
  for (int k = 0; k < 500 && metric(c, "sps_active_rows") != 0; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(metric(c, "sps_kv_cache_bytes_in_use"), 0);
  EXPECT_GT(metric(c, "sps_kv_cache_bytes_allocated"), 0);
}

TEST(Server, AWhitespaceApiKeyIsRefused) {
  ServeModel m("standard");
  serve::ServerOptions o = small_server(2);
  o.api_key = " \t\n";
  EXPECT_THROW(serve::Server(*m.model, byte_level_tokenizer(), o), UserError);
}

// After a client left a request of 199000 tokens on the server's single row: the request was
// cancelled, and the row serves the next request long before 199000 tokens.
void expect_the_row_freed(LiveServer& live) {
  httplib::Client c = live.client();
  int status = 0;
  post_json(c, "/v1/completions", {{"prompt", "b"}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(live.server->metrics().cancelled, 1u);
  EXPECT_LT(live.server->metrics().generated_tokens, 199000u);
}

TEST(Server, ClientDisconnectCancelsTheStream) {
  ServeModel m("sps");
  LiveServer live(*m.model, long_rows(1, 4));
  {
    httplib::Client c = live.client();
    int chunks = 0;
    // Reading stops after two chunks: the client closes the connection mid-stream.
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json({{"prompt", "a"}, {"max_tokens", 199000}, {"stream", true}, {"ignore_eos", true}}).dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
    c.send(req);
  }
  expect_the_row_freed(live);
}

// The same for a request without streaming: nothing is written to it until it ends, so the
// server watches its connection; a client that gives up frees the row.
TEST(Server, ClientDisconnectCancelsANonStreamedRequest) {
  ServeModel m("standard");
  LiveServer live(*m.model, long_rows(1, 4));
  {
    httplib::Client c = live.client();
    c.set_read_timeout(0, 300000);  // gives up after 0.3 s and closes the connection
    auto res = c.Post("/v1/completions",
                      json({{"prompt", "a"}, {"max_tokens", 199000}, {"ignore_eos", true}}).dump(),
                      "application/json");
    EXPECT_FALSE(res);
  }
  expect_the_row_freed(live);
}

}  // namespace
}  // namespace sps::testing
