// The CUDA kernels written for the emulator, run on the CPU by it:
// - the blocked attention (ops/cuda/attention_tiled.cuh) against the dense double reference:
//   every family's mask (streams, persistent stream, window, ω), documents with left padding,
//   a document id that recurs after a gap, sequences that end inside a tile, head sizes below
//   the kernel's; the small-tile build crosses many tiles, the GPU's build (64 × 64, D ≤ 64)
//   is run as compiled for it;
// - the split decode attention (ops/cuda/decode_attention.cuh) against the CPU backend's
//   decode attention: every family's cache (persistent rows within ω, a ring not yet full
//   or full in any rotation), one to more splits than rows, unused cache rows NaN;
// - the bf16 tensor-core forward and backward against the dense reference on the same inputs
//   rounded to bf16;
// - the k most likely ids per row (ops/cuda/top_k.cuh) against the CPU backend's, ties,
//   banned ids and non-finite rows included;
// - AdamW over many ranges in one launch (ops/cuda/adamw.cuh) against the CPU's update;
// - the reference attention kernels (ops/cuda/attention_reference.cuh: heads above the
//   blocked kernels', decode chunks of several tokens) against the dense double reference
//   and the CPU backend's decode attention;
// - the emulator itself: a read of another thread's shared-memory write sees it after a
//   barrier and is caught without one.
#include "cuda_emulator.h"  // first: the CUDA keywords the kernel source uses
#include "ops/cuda/adamw.cuh"
#include "ops/cuda/attention_reference.cuh"
#include "ops/cuda/attention_tiled.cuh"
#include "ops/cuda/decode_attention.cuh"
#include "ops/cuda/top_k.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gradcheck.h"
#include "ops/attention_plan.h"
#include "ops/attention_reference.h"
#include "ops/decode_cache_fixture.h"

namespace sps {
namespace {

namespace tiled = ops::cuda::tiled;
using testing::max_relative_error;

// Each thread writes its index to shared memory and reads its neighbour's, with or without a
// barrier in between.
__global__ void read_neighbour_kernel(float* seen, bool barrier) {
  float* shared = dynamic_shared_floats();
  const int t = int(threadIdx.x), n = int(blockDim.x);
  shared[t] = float(t + 100 * blockIdx.x);
  if (barrier) __syncthreads();
  seen[blockIdx.x * n + t] = shared[(t + 1) % n];
}

TEST(CudaEmulator, ABarrierOrdersSharedMemoryAndAMissingOneIsCaught) {
  const int blocks = 3, threads = 64;
  for (const bool barrier : {true, false}) {
    SCOPED_TRACE(barrier ? "with the barrier" : "without it");
    std::vector<float> seen(blocks * threads, -1.0f);
    cuda_emulator::launch(dim3{blocks, 1, 1}, dim3{threads, 1, 1}, threads * sizeof(float),
                          read_neighbour_kernel, seen.data(), barrier);
    int right = 0;
    for (int b = 0; b < blocks; ++b)
      for (int t = 0; t < threads; ++t)
        right += seen[b * threads + t] == float((t + 1) % threads + 100 * b);
    if (barrier)
      EXPECT_EQ(right, blocks * threads);
    else  // threads run one by one in a random order: about half read before their neighbour
      EXPECT_LT(right, blocks * threads * 3 / 4);
  }
}

struct Outputs {
  std::vector<float> out, lse, dqkv;
};

// Forward and backward through the emulated kernels, the tile plan built as the backend
// builds it; with `bf16`, the tensor-core kernels.
// layout.doc and doc_start are host arrays here.
template <int kTile, int kMaxD>
Outputs run_tiled(const std::vector<float>& qkv, const std::vector<float>& dout,
                  const ops::AttentionLayout& layout, bool bf16 = false) {
  using Shape = tiled::Shape<kTile, kMaxD>;
  ops::AttentionTilePlan plan;
  ops::plan_attention_tiles(plan, layout, kTile, kTile);
  const tiled::Params p =
      tiled::params_of(layout, reinterpret_cast<const uint8_t*>(plan.kinds.data()), kTile);
  const int64_t S = layout.streams * layout.tokens, HD = layout.heads * layout.head_dim;
  const int64_t rows = layout.batch * S, stats = layout.batch * layout.heads * S;
  Outputs o{std::vector<float>(rows * HD), std::vector<float>(stats),
            std::vector<float>(rows * 3 * HD)};
  std::vector<float> delta(stats);
  const tiled::Grid g = tiled::tile_grid(p);
  const dim3 grid{g.x, g.y, g.z};
  const auto* out = o.out.data();
  const auto* lse = o.lse.data();
  const auto* scratch = delta.data();
  if constexpr (kTile == tiled::Bf16Shape<kMaxD>::kTile) {
    if (bf16) {
      using Bf16 = tiled::Bf16Shape<kMaxD>;
      const dim3 block{unsigned(Bf16::kThreads), 1, 1};
      cuda_emulator::launch(grid, block, Bf16::forward_bytes, tiled::forward_bf16_kernel<kMaxD>,
                            o.out.data(), o.lse.data(), qkv.data(), p);
      cuda_emulator::launch(grid, block, Bf16::query_gradient_bytes,
                            tiled::query_gradient_bf16_kernel<kMaxD>, o.dqkv.data(), delta.data(),
                            dout.data(), qkv.data(), out, lse, p);
      cuda_emulator::launch(grid, block, Bf16::key_gradient_bytes,
                            tiled::key_gradient_bf16_kernel<kMaxD>, o.dqkv.data(), scratch,
                            dout.data(), qkv.data(), lse, p);
      return o;
    }
  }
  const dim3 block{unsigned(Shape::kThreads), 1, 1};
  cuda_emulator::launch(grid, block, sizeof(float) * Shape::forward_floats,
                        tiled::forward_kernel<kTile, kMaxD>, o.out.data(), o.lse.data(), qkv.data(),
                        p);
  cuda_emulator::launch(grid, block, sizeof(float) * Shape::query_gradient_floats,
                        tiled::query_gradient_kernel<kTile, kMaxD>, o.dqkv.data(), delta.data(),
                        dout.data(), qkv.data(), out, lse, p);
  cuda_emulator::launch(grid, block, sizeof(float) * Shape::key_gradient_floats,
                        tiled::key_gradient_kernel<kTile, kMaxD>, o.dqkv.data(), scratch,
                        dout.data(), qkv.data(), lse, p);
  return o;
}

struct Case {
  int64_t streams, persistent, window, omega, tokens, head_dim;
  int documents;  // 0 none, 1 contiguous runs after left padding, 2 also an id that recurs
};

std::string name(const Case& c) {
  return "streams " + std::to_string(c.streams) + ", persistent " + std::to_string(c.persistent) +
         ", w " + std::to_string(c.window) + ", omega " + std::to_string(c.omega) + ", T " +
         std::to_string(c.tokens) + ", D " + std::to_string(c.head_dim) + ", documents " +
         std::to_string(c.documents);
}

// A case's layout (2 sequences, 2 heads; its arrays point into this object), random q, k, v
// and dout, and the dense double reference's outputs on them, or on them rounded to bf16.
struct Inputs {
  ops::AttentionLayout layout;
  std::vector<int32_t> doc, doc_start;
  std::vector<double> qkv, dout, out, lse, dqkv;  // inputs, then the reference's outputs
};

Inputs make_inputs(const Case& c, std::mt19937_64& rng, bool round_to_bf16 = false) {
  const int64_t B = 2, H = 2, S = c.streams * c.tokens, HD = H * c.head_dim;
  Inputs x;
  x.layout = testing::mask_layout(B, c.tokens, c.streams, c.persistent, c.window, c.omega);
  x.layout.heads = H;
  x.layout.head_dim = c.head_dim;
  x.doc = testing::random_documents(B, c.tokens, 2, 3, rng);
  if (c.documents == 2) x.doc[c.tokens / 2] = x.doc[0];  // not a contiguous run
  x.doc_start = testing::document_starts(x.doc, B, c.tokens);
  if (c.documents) {
    x.layout.doc = x.doc.data();
    x.layout.doc_start = x.doc_start.data();
  }
  x.qkv = testing::random_vector(B * S * 3 * HD, 5);
  x.dout = testing::random_vector(B * S * HD, 6);
  const auto rounded = [&](std::vector<double> v) {
    if (round_to_bf16)
      for (double& e : v) e = double(ops::cuda::round_bf16(float(e)));
    return v;
  };
  testing::reference_attention_forward(x.out, x.lse, rounded(x.qkv), x.layout);
  testing::reference_attention_backward(x.dqkv, rounded(x.dout), rounded(x.qkv), x.layout);
  return x;
}

template <int kTile, int kMaxD>
void check_against_reference(const std::vector<Case>& cases) {
  std::mt19937_64 rng(11);
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    const Inputs x = make_inputs(c, rng);
    const Outputs tiled = run_tiled<kTile, kMaxD>(testing::cast_vector<float>(x.qkv),
                                                  testing::cast_vector<float>(x.dout), x.layout);
    EXPECT_LT(max_relative_error(tiled.out, x.out), 2e-5);
    EXPECT_LT(max_relative_error(tiled.lse, x.lse), 2e-6);
    EXPECT_LT(max_relative_error(tiled.dqkv, x.dqkv), 5e-5);
  }
}

TEST(AttentionTiledKernels, SmallTilesMatchTheReferenceForEveryMask) {
  std::vector<Case> cases;
  for (const auto& [streams, persistent] : {std::pair<int64_t, int64_t>{1, 0}, {2, 0}, {2, 1}})
    for (const int64_t window : {0, 3, 100})
      for (const int64_t omega : {-1, 2})
        for (const int documents : {0, 1})
          cases.push_back({streams, persistent, window, omega, 37, 16, documents});
  cases.push_back({2, 0, 5, -1, 37, 10, 2});   // a head below the kernel's, a recurring id
  cases.push_back({2, 0, 17, 20, 48, 16, 1});  // whole tiles only; windows across tiles
  cases.push_back({2, 0, 3, -1, 1, 16, 0});
  check_against_reference<16, 16>(cases);
}

TEST(AttentionTiledKernels, TheGpuBuildMatchesTheReference) {
  check_against_reference<64, 64>(
      {{2, 0, 64, -1, 130, 64, 1}, {2, 1, 7, 50, 70, 40, 2}, {1, 0, 0, -1, 129, 64, 1}});
}

// The bf16 kernels against the dense double reference on the same inputs rounded to bf16: the
// only other roundings are P's and dS's to bf16 before their products and the order of the
// sums, so the outputs and gradients agree to well under bf16's step, the log-sum-exps to
// fp32's; and (in the first case) both are visibly not the fp32 kernels'.
TEST(AttentionTiledKernels, Bf16PathMatchesTheReferenceOnRoundedInputs) {
  std::mt19937_64 rng(13);
  bool first = true;
  for (const Case& c : std::vector<Case>{
           {2, 0, 64, -1, 150, 64, 1}, {2, 1, 7, 20, 70, 40, 2}, {1, 0, 0, -1, 129, 64, 0}}) {
    SCOPED_TRACE(name(c));
    const Inputs x = make_inputs(c, rng, true);
    const auto qkv = testing::cast_vector<float>(x.qkv);
    const auto dout = testing::cast_vector<float>(x.dout);
    const Outputs bf16 = run_tiled<64, 64>(qkv, dout, x.layout, true);
    EXPECT_LT(max_relative_error(bf16.out, x.out), 3e-3);
    EXPECT_LT(max_relative_error(bf16.lse, x.lse), 2e-6);
    EXPECT_LT(max_relative_error(bf16.dqkv, x.dqkv), 5e-3);
    if (std::exchange(first, false)) {  // the fp32 kernels are checked on their own elsewhere
      const Outputs fp32 = run_tiled<64, 64>(qkv, dout, x.layout);
      EXPECT_GT(max_relative_error(bf16.out, fp32.out), 1e-4);
      EXPECT_GT(max_relative_error(bf16.dqkv, fp32.dqkv), 1e-4);
    }
  }
}

// The squared norm over blocks of 2¹⁶ elements, the last one short, added in block order as
// the host does: the CPU's sum to double rounding.
TEST(AdamWKernel, SumOfSquaresMatchesTheCpu) {
  namespace adamw = ops::cuda::adamw;
  const int64_t n = 2 * adamw::kSquaresBlockElements + 1234;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  const int64_t blocks = 3;
  std::vector<double> partial(blocks, std::numeric_limits<double>::quiet_NaN());
  cuda_emulator::launch(dim3{unsigned(blocks), 1, 1}, dim3{unsigned(adamw::kBlockThreads), 1, 1},
                        adamw::kSquaresSharedBytes,
                        adamw::block_squares_kernel<adamw::kBlockThreads>, partial.data(),
                        static_cast<const float*>(x.data()), n);
  const double gpu = partial[0] + partial[1] + partial[2];
  const double cpu = ops::sum_squares(x.data(), n);
  EXPECT_NEAR(gpu, cpu, 1e-12 * cpu);
  EXPECT_GT(partial[2], 0.0);
  EXPECT_LT(partial[2], partial[0] / 10);  // the short block holds only its 1234 elements
}

namespace reference = ops::cuda::reference;

// One warp per slot over exactly the visible pairs: the outputs, the gradients and the pair
// count of every mask, with documents, heads below, at and above the blocked kernels' 64.
TEST(ReferenceAttentionKernels, MatchTheDenseReferenceForEveryMask) {
  constexpr int kThreads = reference::kWarp * reference::kWarpsPerBlock;
  std::mt19937_64 rng(17);
  for (const Case& c : std::vector<Case>{{2, 0, 3, -1, 11, 16, 1},
                                         {2, 1, 2, 4, 9, 72, 2},
                                         {1, 0, 0, -1, 10, 40, 1},
                                         {2, 0, 100, 3, 8, 8, 0}}) {
    SCOPED_TRACE(name(c));
    const Inputs x = make_inputs(c, rng);
    const ops::AttentionLayout& l = x.layout;
    const auto qkv = testing::cast_vector<float>(x.qkv);
    const auto dout = testing::cast_vector<float>(x.dout);
    const int64_t S = l.streams * l.tokens, HD = l.heads * l.head_dim;
    const int64_t warps = l.batch * l.heads * S;
    const dim3 grid{unsigned((warps + reference::kWarpsPerBlock - 1) / reference::kWarpsPerBlock),
                    1, 1};
    const dim3 block{unsigned(kThreads), 1, 1};
    const float scale = 1.0f / std::sqrt(float(l.head_dim));
    Outputs o{std::vector<float>(l.batch * S * HD), std::vector<float>(warps),
              std::vector<float>(l.batch * S * 3 * HD)};
    std::vector<float> delta(warps);
    unsigned long long pairs = 0;
    cuda_emulator::launch(grid, block, 0, reference::forward_kernel<kThreads>, o.out.data(),
                          o.lse.data(), qkv.data(), reference::mask_of(l), scale, &pairs);
    cuda_emulator::launch(grid, block, 0, reference::query_gradient_kernel<kThreads>, o.dqkv.data(),
                          delta.data(), dout.data(), qkv.data(),
                          static_cast<const float*>(o.out.data()),
                          static_cast<const float*>(o.lse.data()), reference::mask_of(l), scale);
    cuda_emulator::launch(grid, block, 0, reference::key_gradient_kernel<kThreads>, o.dqkv.data(),
                          static_cast<const float*>(delta.data()), dout.data(), qkv.data(),
                          static_cast<const float*>(o.lse.data()), reference::mask_of(l), scale);
    EXPECT_LT(max_relative_error(o.out, x.out), 2e-5);
    EXPECT_LT(max_relative_error(o.lse, x.lse), 2e-6);
    EXPECT_LT(max_relative_error(o.dqkv, x.dqkv), 5e-5);
    int64_t visible = 0;  // every head computes each visible pair once
    for (int64_t b = 0; b < l.batch; ++b)
      for (const char v : testing::reference_mask(l, b)) visible += v;
    EXPECT_EQ(int64_t(pairs), visible * l.heads);
  }
}

// The reference decode kernel for every family's cache, for a step of one token and for a
// chunk of three (each token also sees the chunk's earlier ones), against the CPU backend.
TEST(ReferenceAttentionKernels, DecodeMatchesTheCpuBackendForStepsAndChunks) {
  constexpr int kThreads = reference::kWarp * reference::kWarpsPerBlock;
  for (const testing::DecodeCacheCase& c : testing::decode_cache_cases())
    for (const int64_t tokens : {int64_t(1), int64_t(3)}) {
      SCOPED_TRACE(testing::name(c) + ", tokens " + std::to_string(tokens));
      testing::DecodeCache cache = testing::make_decode_cache(c);
      ops::DecodeAttentionLayout& l = cache.layout;
      l.tokens = tokens;
      const int64_t rows = l.batch * tokens * l.queries, HD = l.heads * l.head_dim;
      cache.qkv.resize(rows * 3 * HD);
      std::mt19937_64 rng(tokens);
      std::normal_distribution<float> normal;
      for (float& v : cache.qkv) v = normal(rng);
      const auto wide = [](const std::vector<float>& v) {
        return std::vector<double>(v.begin(), v.end());
      };
      std::vector<double> expected(rows * HD);
      ops::attention_decode<double>(expected.data(), wide(cache.qkv).data(), wide(cache.pk).data(),
                                    wide(cache.pv).data(), wide(cache.rk).data(),
                                    wide(cache.rv).data(), l);
      std::vector<float> out(expected.size(), std::numeric_limits<float>::quiet_NaN());
      const int64_t warps = l.batch * l.heads * tokens * l.queries;
      cuda_emulator::launch(
          dim3{unsigned((warps + reference::kWarpsPerBlock - 1) / reference::kWarpsPerBlock), 1, 1},
          dim3{unsigned(kThreads), 1, 1}, 0, reference::decode_kernel<kThreads>, out.data(),
          static_cast<const float*>(cache.qkv.data()), cache.pk.data(), cache.pv.data(),
          cache.rk.data(), cache.rv.data(), l, 1.0f / std::sqrt(float(l.head_dim)));
      EXPECT_LT(max_relative_error(out, expected), 2e-5);
    }
}

namespace decode = ops::cuda::decode;

TEST(DecodeSplits, FillTheGpuWithoutSplitsShorterThan256Rows) {
  EXPECT_EQ(decode::decode_splits(16, 12, 4096 + 64, 132), 3);  // 528 blocks over 192 pairs
  EXPECT_EQ(decode::decode_splits(1, 12, 1024 + 64, 132), 5);   // 44 wanted, 1088 rows allow 5
  EXPECT_EQ(decode::decode_splits(1, 1, 10, 132), 1);
  EXPECT_EQ(decode::decode_splits(1, 1, 0, 132), 1);
  EXPECT_EQ(decode::decode_splits(64, 25, 1 << 20, 132), 1);  // more pairs than blocks
}

void check_split_decode(const testing::DecodeCacheCase& c, int64_t splits) {
  SCOPED_TRACE(testing::name(c) + ", splits " + std::to_string(splits));
  constexpr int kMaxD = 64;
  const testing::DecodeCache cache = testing::make_decode_cache(c);
  const ops::DecodeAttentionLayout& l = cache.layout;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const decode::Params p = decode::params_of(l, splits);
  const int64_t pairs_of_heads = l.batch * l.heads;
  std::vector<float> partials(pairs_of_heads * splits * l.queries * decode::kPartialFloats<kMaxD>,
                              nan);
  std::vector<float> out(cache.expected.size(), nan);
  const size_t shared = sizeof(float) * decode::kGroups * decode::kMaxQueries * (2 + kMaxD);
  cuda_emulator::launch(dim3{unsigned(splits), unsigned(pairs_of_heads), 1},
                        dim3{unsigned(decode::kThreads), 1, 1}, shared, decode::split_kernel<kMaxD>,
                        partials.data(), cache.qkv.data(), cache.pk.data(), cache.pv.data(),
                        cache.rk.data(), cache.rv.data(), p);
  cuda_emulator::launch(dim3{unsigned(pairs_of_heads), 1, 1}, dim3{32 * decode::kMaxQueries, 1, 1},
                        0, decode::merge_kernel<kMaxD>, out.data(),
                        static_cast<const float*>(partials.data()), cache.qkv.data(), p);
  EXPECT_LT(max_relative_error(out, cache.expected), 2e-5);
}

TEST(DecodeAttentionSplitKernels, MatchTheCpuBackendForEveryCache) {
  for (const testing::DecodeCacheCase& c : testing::decode_cache_cases())
    for (const int64_t splits : {int64_t(1), int64_t(3), int64_t(50)})
      check_split_decode(c, splits);
}

// Rows that stress the order: few distinct values (ties), −0 beside +0, the most negative
// floats (keys whose top byte is 0), lengths below, at and above a block's threads; ids
// banned; a row with NaN, one with infinity. The GPU kernels choose what the CPU chooses.
template <int kThreads, int kMaxK>
void check_top_k(int64_t n, const std::vector<int64_t>& ks, uint64_t seed) {
  namespace top_k = ops::cuda::top_k;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> level(0, 9);
  const int64_t rows = 5;
  std::vector<float> x(rows * n);
  for (float& v : x) {
    const int l = level(rng);
    v = l == 0 ? -0.0f : l == 1 ? -3e38f : l == 2 ? -2.5e38f : float(l - 5) * 0.5f;
  }
  if (n > 3) {
    x[1 * n + n / 2] = std::nanf("");
    x[2 * n + n - 1] = -std::numeric_limits<float>::infinity();
  }
  std::vector<uint8_t> banned(n, 0);
  for (int64_t id = 0; id < n; id += 5) banned[id] = 1;
  for (const int64_t k : ks) {
    SCOPED_TRACE(::testing::Message() << "n " << n << " k " << k);
    std::vector<int32_t> cpu_ids(rows * k), cpu_nonfinite(rows);
    std::vector<float> cpu_values(rows * k);
    ops::top_k_rows(cpu_ids.data(), cpu_values.data(), cpu_nonfinite.data(), x.data(), rows, n,
                    banned.data(), k);
    std::vector<int32_t> ids(rows * k, -7), nonfinite(rows, -7);
    std::vector<float> values(rows * k, -7);
    if (k == 1)
      cuda_emulator::launch(dim3{unsigned(rows), 1, 1}, dim3{unsigned(kThreads), 1, 1},
                            top_k::greedy_shared_bytes<kThreads>(), top_k::greedy_kernel<kThreads>,
                            ids.data(), values.data(), nonfinite.data(),
                            static_cast<const float*>(x.data()), n,
                            static_cast<const uint8_t*>(banned.data()));
    else
      cuda_emulator::launch(dim3{unsigned(rows), 1, 1}, dim3{unsigned(kThreads), 1, 1},
                            top_k::shared_bytes<kThreads, kMaxK>(),
                            top_k::top_k_kernel<kThreads, kMaxK>, ids.data(), values.data(),
                            nonfinite.data(), static_cast<const float*>(x.data()), n,
                            static_cast<const uint8_t*>(banned.data()), int(k));
    EXPECT_EQ(ids, cpu_ids);
    EXPECT_EQ(values, cpu_values);
    EXPECT_EQ(nonfinite, cpu_nonfinite);
  }
}

TEST(TopKKernel, MatchesTheCpuBackendTiesIncluded) {
  for (const int64_t n : {1, 7, 63, 64, 65, 1000})
    check_top_k<64, 128>(n, {1, 2, 3, 40, 128}, uint64_t(n));
}

TEST(TopKKernel, MatchesTheCpuBackendAsBuiltForTheGpu) {
  constexpr int kThreads = ops::cuda::top_k::kBlockThreads, kMaxK = int(ops::kMaxTopK);
  check_top_k<kThreads, kMaxK>(3000, {1, 50, 1024}, 9);
}

// Ranges of every size, with and without decay, some empty, with untouched gaps between
// them, and more of them than one launch's table holds.
TEST(AdamWKernel, EveryRangeInOneLaunchMatchesTheCpu) {
  namespace adamw = ops::cuda::adamw;
  std::mt19937 rng(11);
  std::vector<ops::AdamWRange> ranges;
  int64_t n = 0;
  for (int r = 0; r < 150; ++r) {
    const int64_t gap = int64_t(rng() % 3), length = r % 17 == 5 ? 0 : int64_t(1 + rng() % 300);
    ranges.push_back({n + gap, n + gap + length, rng() % 2 == 0});
    n += gap + length;
  }
  ASSERT_EQ(adamw::range_tables(ranges).size(), 3u);
  std::normal_distribution<float> normal;
  std::vector<float> weights(n), grads(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    weights[i] = normal(rng), grads[i] = normal(rng), m[i] = 0.1f * normal(rng);
    v[i] = 0.01f * normal(rng) * normal(rng);
    v[i] *= v[i] < 0 ? -1 : 1;
  }
  ops::AdamWStep step;
  step.lr = 3e-3, step.weight_decay = 0.1, step.grad_scale = 0.7, step.step = 5;
  std::vector<float> cpu_w = weights, cpu_m = m, cpu_v = v;
  ops::adamw_update(cpu_w.data(), grads.data(), cpu_m.data(), cpu_v.data(), ranges, step);
  std::vector<float> gpu_w = weights, gpu_m = m, gpu_v = v;
  for (const adamw::RangeTable& table : adamw::range_tables(ranges))
    cuda_emulator::launch(dim3{3, 1, 1}, dim3{unsigned(adamw::kBlockThreads), 1, 1}, 0,
                          adamw::update_kernel<adamw::kBlockThreads>, gpu_w.data(),
                          static_cast<const float*>(grads.data()), gpu_m.data(), gpu_v.data(),
                          table, ops::AdamWFactors<float>::of(step, step.weight_decay));
  EXPECT_LT(max_relative_error(gpu_w, cpu_w), 1e-6);
  EXPECT_LT(max_relative_error(gpu_m, cpu_m), 1e-6);
  EXPECT_LT(max_relative_error(gpu_v, cpu_v), 1e-6);
  EXPECT_NE(cpu_w, weights);
  int64_t untouched = 0;  // the gaps keep their values
  for (int64_t i = 0, r = 0; i < n; ++i) {
    while (r < int64_t(ranges.size()) && ranges[r].end <= i) ++r;
    if (r == int64_t(ranges.size()) || i < ranges[r].begin) {
      ++untouched;
      EXPECT_EQ(gpu_w[i], weights[i]) << i;
      EXPECT_EQ(cpu_w[i], weights[i]) << i;
    }
  }
  EXPECT_GT(untouched, 50);
}

}  // namespace
}  // namespace sps
