// The GPU kernels of a block's other ops and of the LM head's loss, run on the CPU by the
// CUDA emulator against the CPU backend's ops: RMSNorm forward and backward
// (ops/cuda/rmsnorm.cuh; the gain gradient in two passes), the embedding (its backward in two
// passes over the rows grouped by token), RoPE and SwiGLU (ops/cuda/pointwise.cuh), and the
// cross-entropy (ops/cuda/cross_entropy.cuh), in place where the op is; the memory ops' fill,
// add and row copies and the bf16 operand copies (ops/cuda/elementwise.cuh). Shapes that are not
// multiples of a block, and grids smaller than the work, so that every stride loop turns.
#include "cuda_emulator.h"  // first: the CUDA keywords the kernel source uses
#include "ops/cuda/cross_entropy.cuh"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/pointwise.cuh"
#include "ops/cuda/rmsnorm.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "bf16_reference.h"
#include "gradcheck.h"
#include "ops/ops.h"
#include "ops/token_rows.h"

namespace sps {
namespace {

using cuda_emulator::launch;
using testing::max_relative_error;

std::vector<float> normal_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<int32_t> ids_below(int64_t n, int32_t limit, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = int32_t(rng() % uint32_t(limit));
  return ids;
}

dim3 blocks(unsigned n) { return dim3{n, 1, 1}; }

// The gain gradient's two passes with parts of 4 rows: 6 parts, the last one short.
TEST(EmulatedLayerKernels, RmsNormForwardAndBackwardMatchTheCpu) {
  namespace k = ops::cuda::rmsnorm;
  constexpr int kT = k::kBlockThreads;
  const int64_t rows = 23, d = 300, part_rows = 4, parts = 6;
  const auto in = normal_floats(rows * d, 1), gain = normal_floats(d, 2),
             dout = normal_floats(rows * d, 3);
  std::vector<float> out(rows * d), rstd(rows), gpu_out(rows * d), gpu_rstd(rows);
  ops::rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, 1e-5);
  launch(blocks(rows), blocks(kT), k::kSharedBytes, k::forward_kernel<kT>, gpu_out.data(),
         gpu_rstd.data(), in.data(), gain.data(), d, 1e-5f);
  EXPECT_LT(max_relative_error(gpu_out, out), 1e-5);
  EXPECT_LT(max_relative_error(gpu_rstd, rstd), 1e-5);

  // Accumulating into gradients that already hold something.
  std::vector<float> din = normal_floats(rows * d, 4), dgain = normal_floats(d, 5);
  std::vector<float> gpu_din = din, gpu_dgain = dgain;
  ops::rmsnorm_backward(din.data(), dgain.data(), dout.data(), in.data(), gain.data(), rstd.data(),
                        rows, d);
  launch(blocks(rows), blocks(kT), k::kSharedBytes, k::input_gradient_kernel<kT>, gpu_din.data(),
         dout.data(), in.data(), gain.data(), static_cast<const float*>(rstd.data()), d);
  const unsigned columns = unsigned((d + kT - 1) / kT);
  std::vector<float> partial(parts * d, std::numeric_limits<float>::quiet_NaN());
  launch(dim3{unsigned(parts), columns, 1}, blocks(kT), 0, k::gain_partials_kernel<kT>,
         partial.data(), dout.data(), in.data(), static_cast<const float*>(rstd.data()), rows, d,
         part_rows);
  launch(blocks(columns), blocks(kT), 0, k::gain_sum_kernel<kT>, gpu_dgain.data(),
         static_cast<const float*>(partial.data()), parts, d);
  EXPECT_LT(max_relative_error(gpu_din, din), 1e-4);
  EXPECT_LT(max_relative_error(gpu_dgain, dgain), 1e-5);
}

// The backward's two passes over the rows grouped by token, runs of 16 rows: one token in
// most rows (as PREDICT is in an interleaved family's), repeated and single tokens.
TEST(EmulatedLayerKernels, EmbeddingGatherAndTwoPassBackwardMatchTheCpu) {
  namespace k = ops::cuda::pointwise;
  constexpr int kT = k::kBlockThreads;
  const int64_t n = 150, d = 300, vocab = 40, run = 16;
  const auto table = normal_floats(vocab * d, 1), dout = normal_floats(n * d, 2);
  std::vector<int32_t> tokens = ids_below(n, int32_t(vocab), 3);
  for (int64_t i = 0; i < n; i += 2) tokens[i] = 7;
  for (int64_t i = 1; i < 40; i += 2) tokens[i] = 11;
  std::vector<float> out(n * d), gpu_out(n * d, -1);
  ops::embedding_forward(out.data(), tokens.data(), table.data(), n, d);
  launch(blocks(2), blocks(kT), 0, k::gather_kernel<kT>, gpu_out.data(), tokens.data(),
         table.data(), n, d);
  EXPECT_EQ(gpu_out, out);
  std::vector<float> dtable = normal_floats(vocab * d, 4), gpu_dtable = dtable;
  ops::embedding_backward(dtable.data(), dout.data(), tokens.data(), n, d);
  ops::TokenRowPlan plan;
  ops::plan_token_rows(plan, tokens.data(), n, vocab, run);
  ASSERT_GE(plan.long_tokens, 2);
  ASSERT_GE(plan.runs, 6);
  const std::vector<int32_t> packed = plan.packed();
  const ops::TokenRows rows = plan.view(packed.data());
  const unsigned columns = unsigned((d + kT - 1) / kT);
  std::vector<float> partial(plan.runs * d, std::numeric_limits<float>::quiet_NaN());
  launch(dim3{unsigned(plan.runs), columns, 1}, blocks(kT), 0, k::run_sums_kernel<kT>,
         partial.data(), dout.data(), rows, d);
  launch(dim3{unsigned(plan.tokens), columns, 1}, blocks(kT), 0, k::token_sums_kernel<kT>,
         gpu_dtable.data(), static_cast<const float*>(partial.data()), dout.data(), tokens.data(),
         rows, d);
  EXPECT_LT(max_relative_error(gpu_dtable, dtable), 1e-6);
}

// Both halves of q|k|v rows are rotated (q and k) with the row stride of the fused buffer, and
// the backward is the forward's transpose.
TEST(EmulatedLayerKernels, RopeForwardAndBackwardMatchTheCpu) {
  namespace k = ops::cuda::pointwise;
  constexpr int kT = k::kBlockThreads;
  const int64_t n = 9, heads = 3, D = 8, stride = 3 * heads * D, max_pos = 20;
  std::vector<float> cos_table(max_pos * D / 2), sin_table(max_pos * D / 2);
  ops::rope_tables(cos_table.data(), sin_table.data(), max_pos, D, 10000.0);
  const auto pos = ids_below(n, int32_t(max_pos), 1);
  for (const bool backward : {false, true}) {
    std::vector<float> x = normal_floats(n * stride, 2), gpu_x = x;
    if (backward)
      ops::rope_backward(x.data() + heads * D, pos.data(), n, heads, D, stride, cos_table.data(),
                         sin_table.data());
    else
      ops::rope_forward(x.data() + heads * D, pos.data(), n, heads, D, stride, cos_table.data(),
                        sin_table.data());
    launch(blocks(1), blocks(kT), 0, k::rotate_kernel<kT>, gpu_x.data() + heads * D, pos.data(), n,
           heads, D / 2, stride, static_cast<const float*>(cos_table.data()),
           static_cast<const float*>(sin_table.data()), backward ? -1.0f : 1.0f);
    EXPECT_LT(max_relative_error(gpu_x, x), 1e-6) << (backward ? "backward" : "forward");
  }
}

TEST(EmulatedLayerKernels, SwigluForwardAndBackwardMatchTheCpu) {
  namespace k = ops::cuda::pointwise;
  constexpr int kT = k::kBlockThreads;
  const int64_t rows = 3, F = 130;
  const auto gate_up = normal_floats(rows * 2 * F, 1, 3.0f), dact = normal_floats(rows * F, 2);
  std::vector<float> act(rows * F), gpu_act(rows * F);
  ops::swiglu_forward(act.data(), gate_up.data(), rows, F);
  launch(blocks(1), blocks(kT), 0, k::swiglu_forward_kernel<kT>, gpu_act.data(), gate_up.data(),
         rows * F, F);
  EXPECT_LT(max_relative_error(gpu_act, act), 1e-5);
  std::vector<float> dgate_up(rows * 2 * F), gpu_dgate_up(rows * 2 * F, -1);
  ops::swiglu_backward(dgate_up.data(), dact.data(), gate_up.data(), rows, F);
  launch(blocks(1), blocks(kT), 0, k::swiglu_backward_kernel<kT>, gpu_dgate_up.data(), dact.data(),
         gate_up.data(), rows * F, F);
  EXPECT_LT(max_relative_error(gpu_dgate_up, dgate_up), 1e-5);
}

// The gradient in place over the logits, as the LM head runs it.
TEST(EmulatedLayerKernels, CrossEntropyForwardAndBackwardInPlaceMatchTheCpu) {
  namespace k = ops::cuda::cross_entropy;
  constexpr int kT = k::kBlockThreads;
  const int64_t rows = 4, V = 700;
  const auto logits = normal_floats(rows * V, 1, 4.0f), dnll = normal_floats(rows, 2);
  const auto targets = ids_below(rows, int32_t(V), 3);
  std::vector<float> nll(rows), lse(rows), gpu_nll(rows), gpu_lse(rows);
  ops::cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  launch(blocks(rows), blocks(kT), k::kSharedBytes, k::forward_kernel<kT>, gpu_nll.data(),
         gpu_lse.data(), logits.data(), targets.data(), V);
  EXPECT_LT(max_relative_error(gpu_nll, nll), 1e-5);
  EXPECT_LT(max_relative_error(gpu_lse, lse), 1e-5);
  std::vector<float> dlogits = logits, gpu_dlogits = logits;
  ops::cross_entropy_backward(dlogits.data(), dlogits.data(), lse.data(), targets.data(),
                              dnll.data(), rows, V);
  launch(blocks(3), blocks(kT), 0, k::backward_kernel<kT>, gpu_dlogits.data(),
         static_cast<const float*>(gpu_dlogits.data()), static_cast<const float*>(lse.data()),
         targets.data(), dnll.data(), rows, V);
  EXPECT_LT(max_relative_error(gpu_dlogits, dlogits), 1e-5);
}

}  // namespace
}  // namespace sps

namespace sps {
namespace {

using testing::nearest_bf16;

TEST(EmulatedLayerKernels, FillAddAndBf16CopiesMatchTheHost) {
  namespace elementwise = ops::cuda::elementwise;
  const int64_t n = 1000;
  std::vector<float> y = normal_floats(n, 3), x = normal_floats(n, 4), expected = y;
  for (int64_t i = 0; i < n; ++i) expected[i] += x[i];
  launch(blocks(3), blocks(64), 0, elementwise::add_kernel<float>, y.data(),
         static_cast<const float*>(x.data()), n);
  EXPECT_EQ(y, expected);
  launch(blocks(3), blocks(64), 0, elementwise::fill_kernel<float>, y.data(), n, 2.5f);
  EXPECT_EQ(y, std::vector<float>(n, 2.5f));

  // A strided [rows, cols] matrix: ties (the low half exactly 0x8000, odd and even), values
  // that round up into the next power of two, ±0, infinities, subnormals and a NaN.
  const int64_t rows = 7, cols = 45, ld = 50;
  std::vector<float> m = normal_floats(rows * ld, 5, 100.0f);
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x3f7fffffu, 0x80000000u,
                               0x7f800000u, 0xff800000u, 0x00000001u, 0x007fffffu};
  for (size_t k = 0; k < std::size(specials); ++k) std::memcpy(&m[3 * ld + k], &specials[k], 4);
  m[5 * ld + 2] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> out(rows * cols, 0);
  launch(blocks(2), blocks(64), 0, elementwise::round_bf16_kernel<uint16_t>, out.data(),
         static_cast<const float*>(m.data()), rows * cols, cols, ld);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = m[r * ld + c];
      const uint16_t got = out[r * cols + c];
      if (std::isnan(v))
        EXPECT_TRUE((got & 0x7f80) == 0x7f80 && (got & 0x7f) != 0) << r << "," << c;
      else
        EXPECT_EQ(got, nearest_bf16(v)) << r << "," << c << ": " << v;
    }
}

// Rows at scattered offsets (the KV cache's writes and forks): every row lands where the CPU
// op puts it and nothing else changes, with grids smaller than the rows and rows wider than
// the block.
TEST(EmulatedLayerKernels, RowCopiesMatchTheCpu) {
  namespace elementwise = ops::cuda::elementwise;
  for (const int64_t width : {int64_t(5), int64_t(64), int64_t(300)}) {
    SCOPED_TRACE(width);
    const int64_t n = 37, slots = 50;  // rows go to 37 of 50 slots, shuffled
    std::vector<int64_t> to(slots), from(n);
    std::iota(to.begin(), to.end(), int64_t(0));
    std::shuffle(to.begin(), to.end(), std::mt19937(int(width)));
    to.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      to[i] = to[i] * (width + 2) + i % 3;  // slots of width + 2: no two rows overlap
      from[i] = ((i * 7) % n) * (width + 1);
    }
    const std::vector<float> src = normal_floats(n * (width + 1) + width, 1);
    std::vector<float> expected = normal_floats(slots * (width + 2), 2), got = expected;
    ops::copy_rows(expected.data(), src.data(), to.data(), from.data(), n, width);
    EXPECT_NE(expected, got);
    launch(blocks(8), blocks(elementwise::row_threads(width)), 0,
           elementwise::copy_rows_kernel<float>, got.data(), static_cast<const float*>(src.data()),
           static_cast<const int64_t*>(to.data()), static_cast<const int64_t*>(from.data()), n,
           width);
    EXPECT_EQ(got, expected);
  }
}

}  // namespace
}  // namespace sps
