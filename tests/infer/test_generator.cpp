// The generator: a left-padded batch generates exactly the tokens of each row run alone,
// greedy is deterministic, stops (EOS, stop strings, length), empty and over-long prompts,
// and streamed text equals the final text.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "infer/generator.h"
#include "infer/text_stream.h"
#include "infer/token_logprob.h"
#include "infer_fixtures.h"
#include "util/error.h"

namespace sps::testing {
namespace {

std::vector<std::vector<int32_t>> some_prompts(const ModelConfig& c) {
  return {random_tokens(1, 7, c, 1, {2}), random_tokens(1, 1, c, 2), random_tokens(1, 12, c, 3, {11}),
          random_tokens(1, 4, c, 4)};
}

class GeneratorFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(GeneratorFamilies, LeftPaddedBatchEqualsEachRowAlone) {
  const ModelConfig c = micro_config(GetParam(), 2);
  Model<float> model(c);
  randomize_weights(model, 11);
  GenerationOptions o;
  o.max_new_tokens = 9;
  o.stop_at_eos = false;  // go on through documents
  o.sampling.temperature = 0.8;
  o.sampling.seed = 3;
  const auto prompts = some_prompts(c);
  Generator generator(model, nullptr, o);
  const auto together = generator.generate(prompts);
  for (size_t r = 0; r < prompts.size(); ++r) {
    // Alone, row r gets row r's random stream only when it sits at index r; greedy has no
    // stream, so compare greedy alone and seeded sampling in place.
    std::vector<std::vector<int32_t>> in_place(prompts.size(), std::vector<int32_t>{1});
    in_place[r] = prompts[r];
    EXPECT_EQ(generator.generate(in_place)[r].tokens, together[r].tokens) << "row " << r;
  }
  GenerationOptions g = o;
  g.sampling = {};
  Generator greedy(model, nullptr, g);
  const auto batch = greedy.generate(prompts);
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ(greedy.generate({prompts[r]})[0].tokens, batch[r].tokens) << "row " << r;
    EXPECT_EQ(batch[r].tokens.size(), 9u);
  }
}

TEST_P(GeneratorFamilies, GreedyIsDeterministicAndNeverEmitsPadOrPredict) {
  const ModelConfig c = micro_config(GetParam(), 3);
  Model<float> model(c);
  randomize_weights(model, 12);
  // Make PAD or PREDICT the most likely output everywhere: only feature 0 reaches the head,
  // and their embeddings hold ±1000 there, so one of them tops every row of logits.
  float* W = model.weights();
  for (int64_t k = 1; k < c.hidden_size; ++k) W[model.params().output_norm() + k] = 0;
  W[model.params().output_norm()] = 1;
  W[model.params().wte() + c.pad_token_id * c.hidden_size] = 1000;
  W[model.params().wte() + c.predict_token_id * c.hidden_size] = -1000;
  GenerationOptions o;
  o.max_new_tokens = 20;
  o.stop_at_eos = false;
  Generator generator(model, nullptr, o);
  const auto first = generator.generate(some_prompts(c));
  const auto second = generator.generate(some_prompts(c));
  for (size_t r = 0; r < first.size(); ++r) {
    EXPECT_EQ(first[r].tokens, second[r].tokens);
    for (int32_t t : first[r].tokens) {
      EXPECT_NE(t, c.pad_token_id);
      EXPECT_NE(t, c.predict_token_id);
    }
  }
  o.sampling.temperature = 2.0;
  o.sampling.seed = 8;
  Generator sampling(model, nullptr, o);
  const auto a = sampling.generate(some_prompts(c)), b = sampling.generate(some_prompts(c));
  for (size_t r = 0; r < a.size(); ++r) {
    EXPECT_EQ(a[r].tokens, b[r].tokens);
    for (int32_t t : a[r].tokens) {
      EXPECT_NE(t, c.pad_token_id);
      EXPECT_NE(t, c.predict_token_id);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, GeneratorFamilies, ::testing::ValuesIn(model_families()),
                         [](const auto& info) { return info.param; });

// Rows that draw from their whole row of logits do so side by side: the tokens do not depend
// on the number of threads.
TEST(Generator, WholeRowSamplingGivesTheSameTokensOnAnyThreadCount) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 5);
  GenerationOptions o;
  o.max_new_tokens = 8;
  o.stop_at_eos = false;
  o.sampling.temperature = 1.2;
  o.sampling.top_p = 0.9;
  o.sampling.seed = 4;
  Generator generator(model, nullptr, o);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto alone = generator.generate(some_prompts(c));
  omp_set_num_threads(3);
  const auto together = generator.generate(some_prompts(c));
  omp_set_num_threads(threads);
  for (size_t r = 0; r < alone.size(); ++r) EXPECT_EQ(together[r].tokens, alone[r].tokens) << r;
}

TEST(Generator, StopsAtEosAndAtMaxNewTokens) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 13);
  // Every id but EOS forbidden: EOS is the only choice.
  GenerationOptions o;
  o.max_new_tokens = 5;
  for (int32_t id = 0; id < c.vocab_size; ++id)
    if (id != c.eos_token_id) o.sampling.forbidden.push_back(id);
  Generator generator(model, nullptr, o);
  auto out = generator.generate({{1, 2, 3}});
  ASSERT_EQ(out[0].tokens.size(), 1u);
  EXPECT_EQ(out[0].tokens[0], c.eos_token_id);
  EXPECT_EQ(out[0].stop_reason, StopReason::eos);
  o.stop_at_eos = false;
  Generator through(model, nullptr, o);
  out = through.generate({{1, 2, 3}});
  EXPECT_EQ(out[0].tokens.size(), 5u);
  EXPECT_EQ(out[0].stop_reason, StopReason::length);
}

TEST(Generator, EmptyPromptStartsADocumentAndLongPromptsNeedTruncation) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 14);
  GenerationOptions o;
  o.max_new_tokens = 4;
  o.stop_at_eos = false;
  Generator generator(model, nullptr, o);
  const auto empty = generator.generate({{}});
  EXPECT_EQ(empty[0].prompt, std::vector<int32_t>{c.eos_token_id});
  EXPECT_EQ(empty[0].tokens, generator.generate({{c.eos_token_id}})[0].tokens);
  EXPECT_EQ(empty[0].tokens.size(), 4u);

  const auto long_prompt = random_tokens(1, c.block_size + 3, c, 5);
  EXPECT_THROW(generator.generate({long_prompt}), UserError);
  o.truncate_left = true;
  Generator truncating(model, nullptr, o);
  const auto cut = truncating.generate({long_prompt});
  EXPECT_TRUE(cut[0].truncated);
  EXPECT_EQ(cut[0].prompt, std::vector<int32_t>(long_prompt.begin() + 3, long_prompt.end()));
  EXPECT_EQ(truncating.generate({cut[0].prompt})[0].tokens, cut[0].tokens);
  EXPECT_THROW(generator.generate({{c.pad_token_id}}), UserError);
}

TEST(Generator, StreamedTextEqualsTheTextAndStopsAtStopStrings) {
  const ModelConfig c = byte_micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 15);
  GenerationOptions o;
  o.max_new_tokens = 30;
  o.stop_at_eos = false;
  o.sampling.temperature = 1.0;
  o.sampling.seed = 1;
  o.sampling.allowed_ids = 256;  // bytes only
  Generator generator(model, &byte_level_tokenizer(), o);
  std::map<int64_t, std::string> streamed;
  const auto out = generator.generate_text({"hello", ""}, [&](int64_t row, std::string_view piece) {
    streamed[row] += std::string(piece);
  });
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(streamed[r], out[r].text);
    EXPECT_EQ(out[r].text.size(), 30u);  // one byte per token
  }
  // Stop at a string that occurs in that text: cut just before it.
  const std::string stop = out[0].text.substr(10, 3);
  o.stop_strings = {stop};
  Generator stopping(model, &byte_level_tokenizer(), o);
  std::string piece_text;
  const auto cut = stopping.generate_text({"hello"}, [&](int64_t, std::string_view p) { piece_text += p; });
  EXPECT_EQ(cut[0].stop_reason, StopReason::stop_string);
  EXPECT_EQ(cut[0].text, out[0].text.substr(0, out[0].text.find(stop)));
  EXPECT_EQ(piece_text, cut[0].text);
}

TEST(GenerationRun, StepsGiveGeneratesTokensTextAndLogprobs) {
  const ModelConfig c = byte_micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 16);
  GenerationOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 1.0;
  o.sampling.seed = 4;
  o.sampling.allowed_ids = 256;
  o.stop_strings = {"e"};
  Generator generator(model, &byte_level_tokenizer(), o);
  const auto prompts = generator.encode({"hello", "", "ab"});
  const auto want = generator.generate(prompts);
  o.logprobs = 3;
  Generator with_logprobs(model, &byte_level_tokenizer(), o);
  GenerationRun run(with_logprobs, prompts);
  std::vector<std::vector<int32_t>> ids(3);
  std::vector<std::vector<bool>> last(3);
  std::vector<std::string> text(3);
  while (!run.done()) {
    for (const GeneratedToken& t : run.step()) {
      ASSERT_NE(t.logprob, nullptr);
      EXPECT_EQ(t.logprob->id, t.id);
      ids[t.row].push_back(t.id);
      last[t.row].push_back(t.last);
      text[t.row] += t.text;
    }
  }
  int64_t generated = 0;
  for (size_t r = 0; r < 3; ++r) {
    const Generation& g = run.results()[r];
    EXPECT_EQ(g.tokens, want[r].tokens) << "row " << r;
    EXPECT_EQ(g.text, want[r].text);
    EXPECT_EQ(g.stop_reason, want[r].stop_reason);
    EXPECT_EQ(ids[r], g.tokens);
    EXPECT_EQ(text[r], g.text);
    std::vector<bool> only_the_last(g.tokens.size(), false);
    only_the_last.back() = true;
    EXPECT_EQ(last[r], only_the_last);
    ASSERT_EQ(g.logprobs.size(), g.tokens.size());
    EXPECT_TRUE(want[r].logprobs.empty());
    generated += int64_t(g.tokens.size());
  }
  EXPECT_EQ(run.stats().generated_tokens, generated);
  EXPECT_FALSE(run.step_tokens().empty());  // the last step's, each with last set
  for (const GeneratedToken& t : run.step_tokens()) EXPECT_TRUE(t.last);
}

TEST(GenerationRun, LogprobsAreTheLogSoftmaxOfTheStepsLogits) {
  const ModelConfig c = byte_micro_config("standard", 2);
  Model<float> model(c);
  randomize_weights(model, 17);
  GenerationOptions o;
  o.max_new_tokens = 1;
  o.logprobs = 4;
  Generator generator(model, nullptr, o);
  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111};
  const Generation g = generator.generate({prompt})[0];
  // The logits after the prompt, from the training forward.
  std::vector<int32_t> y(prompt.size(), 0);
  std::vector<double> logits(prompt.size() * size_t(c.vocab_size));
  model.forward(prompt.data(), y.data(), 1, int64_t(prompt.size()), {nullptr, logits.data()});
  const double* last = logits.data() + (prompt.size() - 1) * size_t(c.vocab_size);
  double z = 0;
  for (int64_t v = 0; v < c.vocab_size; ++v) z += std::exp(last[v]);
  ASSERT_EQ(g.logprobs.size(), 1u);
  const TokenLogprob& lp = g.logprobs[0];
  EXPECT_NEAR(lp.logprob, last[lp.id] - std::log(z), 1e-4);
  ASSERT_EQ(lp.top.size(), 4u);
  EXPECT_EQ(lp.top[0].first, g.tokens[0]);  // greedy: the most likely
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(lp.top[k].second, last[lp.top[k].first] - std::log(z), 1e-4);
    if (k) {
      EXPECT_GE(lp.top[k - 1].second, lp.top[k].second);
    }
  }
}

TEST(TokenLogprob, TopIsMostLikelyFirstLowerIdOnTiesAmongVisibleIds) {
  const std::vector<float> logits = {1, 3, 3, 0, 5};
  const TokenLogprob t = token_logprob(logits.data(), 5, 1, 3, /*visible_ids=*/4);
  double z = 0;
  for (float x : logits) z += std::exp(double(x));
  EXPECT_NEAR(t.logprob, 3 - std::log(z), 1e-12);
  ASSERT_EQ(t.top.size(), 3u);  // id 4 is not visible
  EXPECT_EQ(t.top[0].first, 1);
  EXPECT_EQ(t.top[1].first, 2);
  EXPECT_EQ(t.top[2].first, 0);
  EXPECT_TRUE(token_logprob(logits.data(), 5, 4, 0, 5).top.empty());
}

TEST(TextStream, HoldsBackStopPrefixesAndPartialCharacters) {
  TextStream s({"END", "\n\n"});
  EXPECT_EQ(s.push("ab"), "ab");
  EXPECT_EQ(s.push("cE"), "c");     // "E" may start "END"
  EXPECT_EQ(s.push("N"), "");       // "EN" too
  EXPECT_EQ(s.push("x\n"), "ENx");  // no longer; "\n" may start "\n\n"
  EXPECT_EQ(s.push("\xC3"), "\n");  // half of "é"
  EXPECT_EQ(s.push("\xA9z"), "\xC3\xA9z");
  EXPECT_EQ(s.push("yEN"), "y");
  EXPECT_EQ(s.push("Dmore"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "abcENx\n\xC3\xA9zy");
  EXPECT_EQ(s.push("again"), "");
  TextStream plain;
  EXPECT_EQ(plain.push("\xE2\x82"), "");
  EXPECT_EQ(plain.finish(), "\xE2\x82");
}

}  // namespace
}  // namespace sps::testing
