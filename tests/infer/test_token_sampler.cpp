// The sampler: greedy is the argmax of the allowed ids, seeded sampling repeats, top-k = 1 is
// greedy, top-p keeps the nucleus, PAD / PREDICT / forbidden ids never come out, and the
// frequencies follow softmax(logits / temperature).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "infer/token_sampler.h"
#include "model/decoder.h"
#include "model/model_fixtures.h"
#include "util/error.h"

namespace sps::testing {
namespace {

std::vector<float> random_logits(const ModelConfig& c, uint64_t seed, double scale = 2.0) {
  Rng rng(seed);
  std::vector<float> logits(c.vocab_size);
  for (float& x : logits) x = float(scale * rng.normal());
  return logits;
}

TEST(Sampler, GreedyIsTheArgmaxOfAllowedIdsAndNeverPadOrPredict) {
  const ModelConfig c = micro_config("sps", 2);
  TokenSampler sampler({}, c);
  Rng rng(1);
  auto logits = random_logits(c, 3);
  logits[c.pad_token_id] = 100;
  logits[c.predict_token_id] = 90;
  logits[17] = 80;
  EXPECT_EQ(sampler.sample(logits.data(), rng), 17);
  logits[5] = 80;  // a tie: the lower id
  EXPECT_EQ(sampler.sample(logits.data(), rng), 5);
  SamplingOptions forbid;
  forbid.forbidden = {5, 17};
  forbid.allowed_ids = 40;
  logits[30] = 70;
  logits[45] = 75;
  TokenSampler restricted(forbid, c);
  EXPECT_EQ(restricted.sample(logits.data(), rng), 30);
}

TEST(Sampler, SeededSamplingRepeatsAndRowsDiffer) {
  const ModelConfig c = micro_config("standard", 0);
  SamplingOptions o;
  o.temperature = 1.0;
  o.seed = 42;
  TokenSampler a(o, c), b(o, c);
  const auto logits = random_logits(c, 7, 0.5);
  Rng ra = TokenSampler::row_rng(42, 0), rb = TokenSampler::row_rng(42, 0);
  Rng other = TokenSampler::row_rng(42, 1);
  std::vector<int32_t> sa, sb, so;
  for (int i = 0; i < 50; ++i) {
    sa.push_back(a.sample(logits.data(), ra));
    sb.push_back(b.sample(logits.data(), rb));
    so.push_back(a.sample(logits.data(), other));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, so);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  const ModelConfig c = micro_config("sps", 1);
  SamplingOptions o;
  o.temperature = 3.0;
  o.top_k = 1;
  TokenSampler top1(o, c), greedy({}, c);
  Rng rng(9);
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto logits = random_logits(c, seed);
    if (seed % 3 == 0) logits[c.pad_token_id] = 1e3f;
    if (seed % 5 == 0) logits[11] = logits[12] = 50;  // a tie
    EXPECT_EQ(top1.sample(logits.data(), rng), greedy.sample(logits.data(), rng)) << seed;
  }
}

TEST(Sampler, PadPredictAndForbiddenNeverAppear) {
  const ModelConfig c = micro_config("sps", 1);
  SamplingOptions o;
  o.temperature = 5.0;
  o.forbidden = {0, 1, 2};
  TokenSampler sampler(o, c);
  Rng rng(3);
  std::vector<float> logits(c.vocab_size, 0.0f);
  logits[c.pad_token_id] = logits[c.predict_token_id] = logits[0] = 20;
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = sampler.sample(logits.data(), rng);
    EXPECT_NE(t, c.pad_token_id);
    EXPECT_NE(t, c.predict_token_id);
    EXPECT_GT(t, 2);
  }
}

TEST(Sampler, FrequenciesFollowTheTemperedSoftmaxAfterTopKAndTopP) {
  ModelConfig c = micro_config("standard", 0);
  std::vector<float> logits(c.vocab_size, -30.0f);
  // Four ids with probabilities ∝ 8, 4, 2, 1 at temperature 1 (logits ln 8, ln 4, …).
  const int32_t ids[4] = {10, 20, 30, 40};
  for (int k = 0; k < 4; ++k) logits[ids[k]] = float(std::log(8.0 / std::pow(2.0, k)));
  auto frequencies = [&](SamplingOptions o) {
    TokenSampler sampler(o, c);
    Rng rng(5);
    std::map<int32_t, double> f;
    const int n = 40000;
    for (int i = 0; i < n; ++i) f[sampler.sample(logits.data(), rng)] += 1.0 / n;
    return f;
  };
  SamplingOptions plain;
  plain.temperature = 1;
  auto f = frequencies(plain);
  EXPECT_NEAR(f[10], 8.0 / 15, 0.01);
  EXPECT_NEAR(f[40], 1.0 / 15, 0.01);
  SamplingOptions hot = plain;
  hot.temperature = 2;  // ∝ √8, √4, √2, 1
  f = frequencies(hot);
  const double z = std::sqrt(8.0) + 2 + std::sqrt(2.0) + 1;
  EXPECT_NEAR(f[10], std::sqrt(8.0) / z, 0.01);
  SamplingOptions top2 = plain;
  top2.top_k = 2;
  f = frequencies(top2);
  EXPECT_NEAR(f[10], 2.0 / 3, 0.01);
  EXPECT_EQ(f.count(30), 0u);
  SamplingOptions nucleus = plain;
  nucleus.top_p = 0.75;  // 8/15 < 0.75 <= 12/15: the two most likely
  f = frequencies(nucleus);
  EXPECT_NEAR(f[20], 1.0 / 3, 0.01);
  EXPECT_EQ(f.size(), 2u);
  nucleus.top_p = 0.5;  // the first already holds it
  f = frequencies(nucleus);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.begin()->first, 10);
}

TEST(Sampler, BadOptionsAreUserErrors) {
  const ModelConfig c = micro_config("standard", 0);
  SamplingOptions o;
  o.top_p = 0;
  EXPECT_THROW(TokenSampler(o, c), UserError);
  o = {};
  o.temperature = -1;
  EXPECT_THROW(TokenSampler(o, c), UserError);
  o = {};
  o.forbidden = {int32_t(c.vocab_size)};
  EXPECT_THROW(TokenSampler(o, c), UserError);
  o = {};
  for (int32_t id = 0; id < c.vocab_size; ++id) o.forbidden.push_back(id);
  EXPECT_THROW(TokenSampler(o, c), UserError);
}

// Rows of one batch with samplers of their own (a server's requests): greedy, two top-k
// samplers that take the same candidates at different temperatures (one Decoder::top_k for
// both, each drawing at its own), sampling whole rows, and a row skipped. Each token is what
// that row's sampler draws from the whole row of logits, and the skipped row is left alone.
TEST(Sampler, NextTokensOfRowsWithSamplersOfTheirOwn) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 8);
  DecoderShape shape;
  shape.batch = 5;
  shape.max_prompt_tokens = 4;
  Decoder<float> decoder(model, shape);
  const std::vector<int32_t> prompts = random_tokens(5, 4, c, 6, {});
  decoder.prefill(prompts.data(), 4);
  SamplingOptions top_k_cool, top_k_hot, whole;
  top_k_cool.temperature = 0.5, top_k_cool.top_k = 6;
  top_k_hot.temperature = 3.0, top_k_hot.top_k = 6;
  whole.temperature = 1.0;
  const TokenSampler greedy({}, c), cool(top_k_cool, c), hot(top_k_hot, c), all(whole, c);
  const std::vector<const TokenSampler*> samplers = {&greedy, &cool, &hot, &all, &hot};
  const std::vector<uint8_t> skip = {0, 0, 0, 0, 1};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<Rng> rngs, expected_rngs;
    std::vector<Rng*> row_rngs;
    for (int64_t b = 0; b < 5; ++b) rngs.push_back(TokenSampler::row_rng(seed, b));
    expected_rngs = rngs;
    for (Rng& rng : rngs) row_rngs.push_back(&rng);
    std::vector<int32_t> tokens(5, -7), expected(5, -7);
    TokenSampler::next_tokens(decoder, 5, samplers.data(), row_rngs.data(), tokens.data(),
                              skip.data());
    for (int64_t b = 0; b < 4; ++b)
      expected[b] = samplers[b]->sample(decoder.logits() + b * c.vocab_size, expected_rngs[b]);
    EXPECT_EQ(tokens, expected) << "seed " << seed;
  }
}

}  // namespace
}  // namespace sps::testing
