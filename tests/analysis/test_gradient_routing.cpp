// Gradient routing: the one-backward-per-loss-position measurement, batched, equals a
// brute-force run of one single-sequence backward per (p, k).
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/gradient_routing.h"
#include "analysis/slot_gradient_norms.h"
#include "model/model_fixtures.h"

namespace sps::testing {
namespace {

using namespace analysis;

Sequences random_sequences(const ModelConfig& c, int64_t n, int64_t length, uint64_t seed) {
  Sequences s;
  s.length = length;
  for (int64_t k = 0; k < n; ++k) s.tokens.push_back(random_tokens(1, length + 1, c, seed + k));
  return s;
}

// ‖G_s(L_q)‖ at every slot of one sequence, from one backward of L_q alone: with every
// term, then without the readout's.
std::vector<double> slot_norms(Model<double>& model, const std::vector<int32_t>& seq, int64_t W,
                               int64_t q) {
  std::vector<double> weight(size_t(W), 0.0);
  weight[size_t(q)] = 1.0;
  SlotGradientNorms<double> norms(model, 1, W);
  model.forward_backward(seq.data(), seq.data() + 1, 1, W, 1.0,
                         BackwardOptions<double>{.loss_weight = weight.data(), .observer = &norms});
  std::vector<double> out;
  const int64_t slots = model.family().streams() * W;
  for (int64_t s = 0; s < slots; ++s) out.push_back(norms.slot_norm(s));
  for (int64_t s = 0; s < slots; ++s) out.push_back(norms.slot_norm_without_readout(s));
  return out;
}

class RoutingFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(RoutingFamilies, EqualsOneBackwardPerTargetAndK) {
  const ModelConfig c = micro_config(GetParam(), 2);
  Model<double> model(c);
  randomize_weights(model, 41);
  const int64_t W = c.block_size;
  const Sequences seqs = random_sequences(c, 3, W, 50);
  GradientRoutingOptions options{
      .target_begin = 2, .target_end = 8, .max_k = 20, .batch = 2};  // 3 sequences in batches of 2
  const GradientRoutingResult r = measure_gradient_routing(model, seqs, options);
  EXPECT_EQ(r.max_k, W - 1 - 2);  // cut to the window
  EXPECT_EQ(r.targets, 3 * 6);
  EXPECT_EQ(r.backwards, 2 * (W - 2));  // one per loss position q per batch
  ASSERT_EQ(int64_t(r.streams.size()), model.family().streams());

  // Brute force: for each sequence, target p and k, a backward of L_p and one of L_{p+k}.
  // Curve c = 0 (every term) or 1 (without the readout's) of stream s sits at c·S + s·W.
  const int64_t streams = int64_t(r.streams.size()), S = streams * W;
  for (int64_t c = 0; c < 2; ++c) {
    std::vector<double> sum(size_t(streams * r.max_k), 0.0);
    std::vector<int64_t> count(size_t(streams * r.max_k), 0);
    for (const auto& seq : seqs.tokens)
      for (int64_t p = 2; p < 8; ++p) {
        const auto present = slot_norms(model, seq, W, p);
        for (int64_t k = 1; k <= r.max_k && p + k < W; ++k) {
          const auto future = slot_norms(model, seq, W, p + k);
          for (int64_t s = 0; s < streams; ++s) {
            const size_t at = size_t(c * S + s * W + p);
            if (present[at] == 0) continue;
            sum[size_t(s * r.max_k + k - 1)] += future[at] / present[at];
            ++count[size_t(s * r.max_k + k - 1)];
          }
        }
      }
    for (int64_t s = 0; s < streams; ++s) {
      const StreamRouting& st = r.streams[size_t(s)];
      EXPECT_EQ(st.persistent,
                !model.family().interleaved || int64_t(model.family().persistent_slot) == s);
      const RatioCurve& curve = c == 0 ? st.all : st.without_readout;
      for (int64_t k = 1; k <= r.max_k; ++k) {
        const size_t i = size_t(s * r.max_k + k - 1);
        ASSERT_EQ(curve.count[size_t(k - 1)], count[i]) << st.name << " c=" << c << " k=" << k;
        if (count[i] == 0) continue;
        EXPECT_NEAR(curve.ratio[size_t(k - 1)], sum[i] / double(count[i]), 1e-12)
            << st.name << " c=" << c << " k=" << k;
      }
    }
  }
  // Future losses never reach the readout terms at p, so leaving them out only lowers the
  // present norm of the readout stream: its ratios can only grow.
  for (const auto& st : r.streams)
    if (st.readout) EXPECT_GT(st.without_readout.ratio[0], st.all.ratio[0]) << st.name;
    else EXPECT_DOUBLE_EQ(st.without_readout.ratio[0], st.all.ratio[0]) << st.name;
}

INSTANTIATE_TEST_SUITE_P(Analysis, RoutingFamilies, ::testing::ValuesIn(model_families()));

// reverse_sps reads logits at the input slot, which comes before the predict slot of its
// pair: L_p never reaches p's predict slot, so those targets are left out, not divided by 0.
TEST(GradientRouting, ZeroPresentGradientIsLeftOut) {
  const ModelConfig c = micro_config("reverse_sps", 3);
  Model<double> model(c);
  randomize_weights(model, 43);
  const Sequences seqs = random_sequences(c, 1, c.block_size, 60);
  const auto r = measure_gradient_routing(
      model, seqs,
      GradientRoutingOptions{.target_begin = 1, .target_end = 6, .max_k = 4, .batch = 1});
  ASSERT_EQ(r.streams.size(), 2u);
  EXPECT_EQ(r.streams[0].all.zero_present, 0);
  EXPECT_EQ(r.streams[1].all.zero_present, 5);
  EXPECT_EQ(r.streams[1].without_readout.zero_present, 5);
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(r.streams[1].all.count[size_t(k)], 0);
  EXPECT_GT(r.streams[0].all.ratio[0], 0);
}

}  // namespace
}  // namespace sps::testing
