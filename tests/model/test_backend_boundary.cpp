// The backend boundary: the model and the optimizer hand the backend's ops nothing but
// memory that backend allocated (a GPU backend could not read a host array), and a step
// through it is the CPU backend's step. A checking backend wraps the CPU one and records
// every pointer an op or a copy receives that lies outside its allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "infer/generator.h"
#include "infer/token_sampler.h"
#include "model/backend_lockstep.h"
#include "model/checking_backend.h"
#include "model/flops.h"
#include "ops/attention_plan.h"
#include "ops/decode_keys.h"
#include "train/optimizer.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using testing::CheckingBackend;

// Training steps and a scoring forward on the checking backend and on the CPU backend, for
// every family, with and without recomputation: the same bits, and no stray pointer.
void bitwise_equal(const std::string& what, const std::vector<double>& a,
                   const std::vector<double>& b) {
  EXPECT_EQ(a, b) << what;
}

TEST(BackendBoundary, TrainingStepsPassOnlyTheBackendsMemoryAndMatchTheCpu) {
  for (const std::string& family : testing::model_families()) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(family + (recompute ? ", recomputed" : ""));
      const CheckingBackend checking;
      testing::train_in_lockstep(testing::micro_config(family, 3), checking, recompute,
                                 bitwise_equal);
      EXPECT_GT(checking.calls, 0);
      EXPECT_EQ(checking.strays, std::vector<std::string>{});
    }
  }
}

// The optimizer's moments cross to and from a file through host copies when the backend's
// memory is not the host's.
TEST(BackendBoundary, OptimizerStateRoundTripsThroughHostCopies) {
  const ModelConfig c = testing::micro_config("sps", 2);
  const ParamTable table(c);
  const CheckingBackend checking;
  const int64_t P = table.total();
  ops::DeviceBuffer<float> w(checking), g(checking);
  std::vector<float> host_g(P);
  for (int64_t i = 0; i < P; ++i) host_g[i] = float(i % 5) - 2.0f;
  const std::vector<float> host_w(P, 0.25f);
  w.upload(host_w.data(), P);
  g.upload(host_g.data(), P);
  AdamW a(table, OptimizerSettings{}, checking);
  a.update(checking, w.data(), g.data(), 1e-3, 1.0);
  testing::TempDir dir;
  a.save(dir.file("optimizer.safetensors"));
  AdamW b(table, OptimizerSettings{}, checking);
  b.load(dir.file("optimizer.safetensors"));
  EXPECT_EQ(b.step(), 1);
  std::vector<float> m_a(P), m_b(P);
  checking.download(m_a.data(), a.exp_avg_sq(), P * sizeof(float));
  checking.download(m_b.data(), b.exp_avg_sq(), P * sizeof(float));
  EXPECT_EQ(m_a, m_b);
  EXPECT_NE(m_a, std::vector<float>(P, 0.0f));
  EXPECT_EQ(checking.strays, std::vector<std::string>{});
}

// Cached generation on the checking backend (its logits reach the host through copies):
// the CPU decoder's logits, and every op sees only the backend's memory.
TEST(BackendBoundary, CachedGenerationPassesOnlyTheBackendsMemoryAndMatchesTheCpu) {
  for (const std::string& family : testing::model_families()) {
    SCOPED_TRACE(family);
    const CheckingBackend checking;
    testing::decode_in_lockstep(testing::micro_config(family, 2), checking, bitwise_equal);
    EXPECT_GT(checking.calls, 0);
    EXPECT_EQ(checking.strays, std::vector<std::string>{});
  }
}

// Three rows of prompts of 6 tokens, then 4 steps: the decoders of the tests below.
DecoderShape three_rows() {
  DecoderShape shape;
  shape.batch = 3;
  shape.max_prompt_tokens = 6;
  shape.max_new_tokens = 4;
  return shape;
}

// Generation on the checking backend, greedy and sampled (top-k, and top-k with top-p),
// takes each row's candidates where the logits are (Decoder::top_k): no row of logits comes
// to the host, and every token is the one the sampler draws from the whole row of a CPU
// decoder's logits on the same weights, step after step; so are the tokens of sampling
// without top-k, which copies the logits.
TEST(BackendBoundary, TokensChosenWhereTheLogitsAreMatchSamplingTheCpuLogits) {
  const int64_t B = 3, P = 6, N = 5;
  for (const std::string& family : testing::model_families()) {
    SCOPED_TRACE(family);
    const ModelConfig c = testing::micro_config(family, 2);
    const CheckingBackend checking;
    Model<float> on_device(c, checking), on_cpu(c);
    on_device.init_weights(3);
    on_cpu.init_weights(3);
    const std::vector<int32_t> prompts = testing::random_tokens(B, P, c, 5, {});
    std::vector<std::vector<int32_t>> prompt_rows;
    for (int64_t b = 0; b < B; ++b)
      prompt_rows.emplace_back(prompts.begin() + b * P, prompts.begin() + (b + 1) * P);
    std::vector<SamplingOptions> samplings(4);
    samplings[1].temperature = 0.9, samplings[1].top_k = 5, samplings[1].seed = 7;
    samplings[2].temperature = 1.3, samplings[2].top_k = 8, samplings[2].top_p = 0.8;
    samplings[2].seed = 8;
    samplings[3].temperature = 1.1, samplings[3].top_p = 0.9, samplings[3].seed = 9;  // whole rows
    for (const SamplingOptions& sampling : samplings) {
      SCOPED_TRACE(sampling.top_k);
      DecoderShape shape = three_rows();
      shape.max_new_tokens = N;
      Decoder<float> reference(on_cpu, shape);
      TokenSampler sampler(sampling, c);
      std::vector<Rng> rngs;
      for (int64_t b = 0; b < B; ++b) rngs.push_back(TokenSampler::row_rng(sampling.seed, b));
      std::vector<std::vector<int32_t>> expected(B);
      reference.prefill(prompts.data(), P);
      for (int64_t n = 0; n < N; ++n) {
        std::vector<int32_t> next(B);
        for (int64_t b = 0; b < B; ++b) {
          next[b] = sampler.sample(reference.logits() + b * c.vocab_size, rngs[b]);
          expected[b].push_back(next[b]);
        }
        reference.step(next.data());
      }
      GenerationOptions options;
      options.max_new_tokens = N;
      options.sampling = sampling;
      options.stop_at_eos = false;
      Generator generator(on_device, nullptr, options);
      checking.largest_download = 0;
      const std::vector<Generation> got = generator.generate(prompt_rows);
      for (int64_t b = 0; b < B; ++b) EXPECT_EQ(got[b].tokens, expected[b]) << "row " << b;
      if (sampling.top_k > 0 || sampling.temperature == 0) {
        EXPECT_LT(checking.largest_download, c.vocab_size * int64_t(sizeof(float)));
      }
    }
    EXPECT_EQ(checking.strays, std::vector<std::string>{});
  }
}

// The FLOPs `sps bench generate` holds decode against (model/flops.h) are those the decoder's
// ops are asked for in a step: every projection, the LM head and 4·D per attention pair.
TEST(BackendBoundary, DecodeStepFlopsAreTheDecodersOps) {
  for (const std::string& family : testing::model_families()) {
    SCOPED_TRACE(family);
    const ModelConfig c = testing::micro_config(family, 2);
    const CheckingBackend checking;
    Model<float> model(c, checking);
    model.init_weights(3);
    DecoderShape shape = three_rows();
    Decoder<float> decoder(model, shape);
    const std::vector<int32_t> prompts = testing::random_tokens(3, 6, c, 5, {});
    decoder.prefill(prompts.data(), 6);
    for (int32_t token = 1; token < 4; ++token) {
      checking.decode_linear_flops = 0;
      checking.decode_pairs = 0;
      const std::vector<int32_t> step = {token, token + 1, token + 2};
      decoder.step(step.data());
      EXPECT_EQ(checking.decode_pairs, decoder.last_step_attention_pairs());
      EXPECT_GT(checking.decode_pairs, 0);
      EXPECT_DOUBLE_EQ(decode_projection_flops(c, 3), checking.decode_linear_flops);
      EXPECT_DOUBLE_EQ(decode_step_flops(c, 3, double(checking.decode_pairs)),
                       checking.decode_linear_flops +
                           4.0 * double(c.head_dim()) * double(checking.decode_pairs));
    }
  }
}

// The backend calls of a decode step, a prefill and a fork do not grow with the batch, the
// heads or the prompt: one K/V write per layer (not one copy per layer, row and head, which
// on a GPU is a cudaMemcpy each), the step's counts and inputs in two uploads, and nothing
// read back during a step. A step makes 11 calls per layer and 6 more (8 for interleaved
// families, which gather their readout rows before the last layer's projection).
TEST(BackendBoundary, DecodeStepsPrefillsAndForksMakeAFixedNumberOfBackendCalls) {
  struct Calls {
    int64_t prefill = 0, step = 0, fork = 0, step_downloads = 0;
    bool operator==(const Calls&) const = default;
  };
  for (const std::string& family : testing::model_families()) {
    SCOPED_TRACE(family);
    const auto calls_of = [&](int64_t B, int64_t heads, int64_t P) {
      ModelConfig c = testing::micro_config(family, 2);
      c.n_head = heads;
      const CheckingBackend checking;
      Model<float> model(c, checking);
      model.init_weights(3);
      DecoderShape shape;
      shape.batch = B;
      shape.max_prompt_tokens = P;
      shape.max_new_tokens = 4;
      Decoder<float> decoder(model, shape), other(model, shape);
      const std::vector<int32_t> prompts = testing::random_tokens(B, P, c, 5, {});
      const std::vector<int32_t> tokens(B, 7);
      decoder.prefill(prompts.data(), P);  // the first prefill and step plan their memory
      decoder.step(tokens.data());
      other.prefill(prompts.data(), P);
      Calls calls;
      int64_t before = checking.calls;
      decoder.prefill(prompts.data(), P);
      calls.prefill = checking.calls - before;
      decoder.step(tokens.data());
      before = checking.calls;
      const int64_t downloads = checking.downloads;
      decoder.step(tokens.data());
      calls.step = checking.calls - before;
      calls.step_downloads = checking.downloads - downloads;
      before = checking.calls;
      decoder.fork(B - 1, other, 0);
      calls.fork = checking.calls - before;
      EXPECT_EQ(checking.strays, std::vector<std::string>{});
      return calls;
    };
    const Calls few = calls_of(1, 2, 3), many = calls_of(5, 4, 9);
    EXPECT_EQ(few, many) << "prefill " << few.prefill << " / " << many.prefill << ", step "
                         << few.step << " / " << many.step << ", fork " << few.fork << " / "
                         << many.fork;
    const int64_t L = 2, interleaved = family == "standard" ? 0 : 2;
    EXPECT_EQ(many.step, 11 * L + 6 + interleaved);
    EXPECT_EQ(many.step_downloads, 0);
    EXPECT_LE(many.fork, 5);  // the offsets, at most three row copies, the logits
  }
}

}  // namespace
}  // namespace sps
