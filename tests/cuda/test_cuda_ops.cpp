// The CUDA backend's ops against the CPU backend, on a real GPU: forward and backward, the
// accumulation rules of ops.h, and the same bits when a call is repeated. Skipped where no
// GPU is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "ops/cuda/kernels.h"
#include "ops/ops.h"
#include "ops/token_rows.h"

namespace sps {
namespace {

using testing::cast_vector;
using testing::DeviceFloats;
using testing::DeviceInts;
using testing::max_relative_error;
using testing::random_vector;

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  return cast_vector<float>(random_vector(n, seed));
}

TEST(CudaOps, RmsNormMatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  // The gain gradient's parts of 256 rows: one, two, and 20 with a short last one.
  for (const auto& [rows, d] :
       {std::pair<int64_t, int64_t>{1, 8}, {37, 100}, {300, 768}, {5, 1000}, {5000, 300}}) {
    const auto in = random_floats(rows * d, 1), gain = random_floats(d, 2),
               dout = random_floats(rows * d, 3);
    auto out = random_floats(rows * d, 4), rstd = random_floats(rows, 5),
         din = random_floats(rows * d, 6), dgain = random_floats(d, 7);
    DeviceFloats d_in(in), d_gain(gain), d_dout(dout), d_out(out), d_rstd(rstd), d_din(din),
        d_dgain(dgain);
    ops::rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, 1e-5);
    ops::rmsnorm_backward(din.data(), dgain.data(), dout.data(), in.data(), gain.data(),
                          rstd.data(), rows, d);
    ops::cuda::rmsnorm_forward(d_out.data, d_rstd.data, d_in.data, d_gain.data, rows, d, 1e-5);
    ops::cuda::rmsnorm_backward(d_din.data, d_dgain.data, d_dout.data, d_in.data, d_gain.data,
                                d_rstd.data, rows, d);
    EXPECT_LT(max_relative_error(d_out.read(), out), 1e-5) << rows << "x" << d;
    EXPECT_LT(max_relative_error(d_rstd.read(), rstd), 1e-5) << rows << "x" << d;
    EXPECT_LT(max_relative_error(d_din.read(), din), 1e-5) << rows << "x" << d;
    EXPECT_LT(max_relative_error(d_dgain.read(), dgain), 1e-5) << rows << "x" << d;
  }
}

TEST(CudaOps, SwigluMatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  for (const auto& [rows, F] : {std::pair<int64_t, int64_t>{1, 3}, {37, 100}, {300, 2048}}) {
    const auto gate_up = random_floats(rows * 2 * F, 1), dact = random_floats(rows * F, 2);
    std::vector<float> act(rows * F), dgate_up(rows * 2 * F);
    DeviceFloats d_gate_up(gate_up), d_dact(dact), d_act(rows * F), d_dgate_up(rows * 2 * F);
    ops::swiglu_forward(act.data(), gate_up.data(), rows, F);
    ops::swiglu_backward(dgate_up.data(), dact.data(), gate_up.data(), rows, F);
    ops::cuda::swiglu_forward(d_act.data, d_gate_up.data, rows, F);
    ops::cuda::swiglu_backward(d_dgate_up.data, d_dact.data, d_gate_up.data, rows, F);
    // The CPU's exp is a fast approximation (ops/cpu/cpu_common.h); the GPU's is expf.
    EXPECT_LT(max_relative_error(d_act.read(), act), 1e-5) << rows << "x" << F;
    EXPECT_LT(max_relative_error(d_dgate_up.read(), dgate_up), 1e-5) << rows << "x" << F;
  }
}

TEST(CudaOps, RopeMatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  const int64_t n = 50, heads = 3, head_dim = 16, row_stride = 3 * heads * head_dim, max_pos = 64;
  std::vector<float> cos_table(max_pos * head_dim / 2), sin_table(max_pos * head_dim / 2);
  ops::rope_tables(cos_table.data(), sin_table.data(), max_pos, head_dim, 10000.0);
  std::vector<int32_t> pos(n);
  for (int64_t r = 0; r < n; ++r) pos[r] = int32_t((r * 7) % max_pos);
  auto x = random_floats(n * row_stride, 1), dx = random_floats(n * row_stride, 2);
  DeviceFloats d_x(x), d_dx(dx), d_cos(cos_table), d_sin(sin_table);
  DeviceInts d_pos(pos);
  // q and k of a fused qkv row: two calls on column offsets 0 and H·D, v untouched.
  for (int64_t offset : {int64_t(0), heads * head_dim}) {
    ops::rope_forward(x.data() + offset, pos.data(), n, heads, head_dim, row_stride,
                      cos_table.data(), sin_table.data());
    ops::rope_backward(dx.data() + offset, pos.data(), n, heads, head_dim, row_stride,
                       cos_table.data(), sin_table.data());
    ops::cuda::rope_forward(d_x.data + offset, d_pos.data, n, heads, head_dim, row_stride,
                            d_cos.data, d_sin.data);
    ops::cuda::rope_backward(d_dx.data + offset, d_pos.data, n, heads, head_dim, row_stride,
                             d_cos.data, d_sin.data);
  }
  EXPECT_LT(max_relative_error(d_x.read(), x), 1e-6);
  EXPECT_LT(max_relative_error(d_dx.read(), dx), 1e-6);
}

// The backward over rows grouped by token: tokens in a few rows and in hundreds (runs of
// kEmbeddingRunRows summed apart, then in order), the same bits when repeated.
TEST(CudaOps, EmbeddingMatchesTheCpuBackendWithRepeatedTokens) {
  SPS_REQUIRE_GPU();
  const int64_t vocab = 40, n = 3000, d = 300;
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = int32_t((i * i + 3) % vocab);  // many repeats
  for (int64_t i = 0; i < n; i += 2) tokens[i] = 39;                         // half one id
  const auto table = random_floats(vocab * d, 1), dout = random_floats(n * d, 2);
  auto dtable = random_floats(vocab * d, 3);
  std::vector<float> out(n * d);
  DeviceFloats d_table(table), d_dout(dout), d_dtable(dtable), d_out(n * d);
  DeviceInts d_tokens(tokens);
  ops::TokenRowPlan plan;
  ops::plan_token_rows(plan, tokens.data(), n, vocab, ops::cuda::kEmbeddingRunRows);
  ASSERT_GT(plan.runs, 20);
  DeviceInts d_rows(plan.packed());
  const ops::TokenRows rows = plan.view(d_rows.data);
  ops::embedding_forward(out.data(), tokens.data(), table.data(), n, d);
  ops::embedding_backward(dtable.data(), dout.data(), tokens.data(), n, d);
  ops::cuda::embedding_forward(d_out.data, d_tokens.data, d_table.data, n, d);
  ops::cuda::embedding_backward(d_dtable.data, d_dout.data, d_tokens.data, n, d, rows);
  EXPECT_EQ(d_out.read(), out);  // a copy
  const std::vector<float> first = d_dtable.read();
  EXPECT_LT(max_relative_error(first, dtable), 1e-6);
  DeviceFloats repeat(random_floats(vocab * d, 3));  // the same table gradient as before
  ops::cuda::embedding_backward(repeat.data, d_dout.data, d_tokens.data, n, d, rows);
  EXPECT_EQ(repeat.read(), first) << "a repeated backward differs";
}

TEST(CudaOps, CrossEntropyMatchesTheCpuBackendInPlace) {
  SPS_REQUIRE_GPU();
  const int64_t rows = 40, V = 50304;
  auto logits = cast_vector<float>(random_vector(rows * V, 1, 4.0));
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = int32_t((r * 7919) % V);
  const auto dnll = random_floats(rows, 2);
  std::vector<float> nll(rows), lse(rows);
  DeviceFloats d_logits(logits), d_dnll(dnll), d_nll(rows), d_lse(rows);
  DeviceInts d_targets(targets);
  ops::cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  ops::cuda::cross_entropy_forward(d_nll.data, d_lse.data, d_logits.data, d_targets.data, rows, V);
  EXPECT_LT(max_relative_error(d_nll.read(), nll), 1e-5);
  EXPECT_LT(max_relative_error(d_lse.read(), lse), 1e-5);
  // The LM head overwrites its logits with their gradient (ops.h allows the alias).
  ops::cross_entropy_backward(logits.data(), logits.data(), lse.data(), targets.data(),
                              dnll.data(), rows, V);
  ops::cuda::cross_entropy_backward(d_logits.data, d_logits.data, d_lse.data, d_targets.data,
                                    d_dnll.data, rows, V);
  EXPECT_LT(max_relative_error(d_logits.read(), logits), 1e-5);
}

// The k most likely ids of a vocabulary of logits with repeated values (ties), some ids
// banned, k = 1 (greedy) to the most the kernel takes, and a row with a NaN: the CPU's ids,
// values and non-finite ids exactly.
// Each row's k most likely ids on the GPU against the CPU backend, for each k.
void check_top_k(int64_t rows, int64_t V, const std::vector<int64_t>& ks) {
  auto logits = random_floats(rows * V, 5);
  for (float& x : logits) x = float(int(x * 4.0f)) / 4.0f;  // few distinct values: ties
  logits[2 * V + 777] = std::nanf("");
  std::vector<uint8_t> banned(V, 0);
  banned[V - 48] = banned[3] = 1;
  DeviceFloats d_logits(logits);
  DeviceArray<uint8_t> d_banned(banned);
  for (const int64_t k : ks) {
    SCOPED_TRACE(k);
    std::vector<int32_t> ids(rows * k), nonfinite(rows);
    std::vector<float> values(rows * k);
    ops::top_k_rows(ids.data(), values.data(), nonfinite.data(), logits.data(), rows, V,
                    banned.data(), k);
    DeviceInts d_ids(std::vector<int32_t>(rows * k, -7)), d_nonfinite(rows);
    DeviceFloats d_values(rows * k);
    ops::cuda::top_k_rows(d_ids.data, d_values.data, d_nonfinite.data, d_logits.data, rows, V,
                          d_banned.data, k);
    EXPECT_EQ(d_ids.read(), ids);
    EXPECT_EQ(d_values.read(), values);
    EXPECT_EQ(d_nonfinite.read(), nonfinite);
  }
}

TEST(CudaOps, TopKMatchesTheCpuBackendTiesIncluded) {
  SPS_REQUIRE_GPU();
  check_top_k(16, 50304, {1, 2, 40, ops::kMaxTopK});
}

// A small case of each top-k kernel, for compute-sanitizer's racecheck (gpu-check.sh).
TEST(CudaOps, TopKAtSmallShapes) {
  SPS_REQUIRE_GPU();
  check_top_k(3, 3000, {1, 40, ops::kMaxTopK});
}

TEST(CudaOps, AdamWAndSumOfSquaresMatchTheCpuBackend) {
  SPS_REQUIRE_GPU();
  const int64_t n = 300000;
  auto weights = random_floats(n, 1), m = random_floats(n, 3), v = random_floats(n, 4);
  for (float& x : v) x = x * x;  // second moments are not negative
  const auto grads = random_floats(n, 2);
  DeviceFloats d_weights(weights), d_grads(grads), d_m(m), d_v(v);
  ops::AdamWStep step;
  step.lr = 3e-3, step.weight_decay = 0.1, step.grad_scale = 0.7, step.step = 5;
  std::vector<ops::AdamWRange> ranges;  // 150 ranges: more than one launch holds
  for (int64_t r = 0; r < 150; ++r) ranges.push_back({r * 2000, (r + 1) * 2000, r % 3 != 0});
  ranges.back().end = n;
  ops::adamw_update(weights.data(), grads.data(), m.data(), v.data(), ranges, step);
  ops::cuda::adamw_update(d_weights.data, d_grads.data, d_m.data, d_v.data, ranges, step);
  EXPECT_LT(max_relative_error(d_weights.read(), weights), 1e-6);
  EXPECT_LT(max_relative_error(d_m.read(), m), 1e-6);
  EXPECT_LT(max_relative_error(d_v.read(), v), 1e-6);
  const double cpu = ops::sum_squares(grads.data(), n);
  EXPECT_NEAR(ops::cuda::sum_squares(d_grads.data, n), cpu, 1e-12 * cpu);
  EXPECT_EQ(ops::cuda::sum_squares(d_grads.data, n), ops::cuda::sum_squares(d_grads.data, n));
}

// No atomics: the same call on the same input gives the same bits.
TEST(CudaOps, RmsNormBackwardIsBitwiseRepeatable) {
  SPS_REQUIRE_GPU();
  const int64_t rows = 4096, d = 512;
  const auto in = random_floats(rows * d, 1), gain = random_floats(d, 2),
             dout = random_floats(rows * d, 3), rstd = random_floats(rows, 4);
  DeviceFloats d_in(in), d_gain(gain), d_dout(dout), d_rstd(rstd);
  std::vector<std::vector<float>> results;
  for (int run = 0; run < 2; ++run) {
    DeviceFloats d_din(rows * d), d_dgain(d);
    ops::cuda::fill(d_din.data, rows * d, 0);
    ops::cuda::fill(d_dgain.data, d, 0);
    ops::cuda::rmsnorm_backward(d_din.data, d_dgain.data, d_dout.data, d_in.data, d_gain.data,
                                d_rstd.data, rows, d);
    results.push_back(d_dgain.read());
    const auto din = d_din.read();
    results.back().insert(results.back().end(), din.begin(), din.end());
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace sps
