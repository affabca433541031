// The CUDA attention kernels, reference and blocked, against the CPU backend on a real GPU:
// every family's mask (streams, persistent stream, window, ω), documents and left padding,
// head sizes that are and are not multiples of 32; forward, backward, the pair count, and
// the same bits when a call is repeated. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "ops/attention_plan.h"
#include "ops/attention_reference.h"
#include "ops/cuda/attention_tiled.h"
#include "ops/cuda/kernels.h"
#include "ops/decode_cache_fixture.h"
#include "ops/ops.h"

namespace sps {
namespace {

using testing::cast_vector;
using testing::DeviceArray;
using testing::DeviceFloats;
using testing::DeviceInts;
using testing::max_relative_error;
using testing::random_vector;

struct Case {
  int64_t streams, persistent, window, omega, tokens, head_dim;
  bool documents;
};

std::string name(const Case& c) {
  return "streams " + std::to_string(c.streams) + ", persistent " + std::to_string(c.persistent) +
         ", w " + std::to_string(c.window) + ", omega " + std::to_string(c.omega) + ", T " +
         std::to_string(c.tokens) + ", D " + std::to_string(c.head_dim) +
         (c.documents ? ", documents" : "");
}

// Forward and backward of every case on the GPU against the CPU backend; with `tiled`, the
// layout carries the tile plan the blocked kernels read (heads above 64 still take the
// reference kernels). The pair count is exact: the visible pairs (reference) or the plan's.
// With Precision::bf16 the CPU computes on the inputs rounded to bf16 here; the GPU also
// rounds P and dS to bf16 before their products and sums in another order, hence the wider
// tolerances.
void check_against_the_cpu(const std::vector<Case>& cases, bool tiled,
                           ops::Precision precision = ops::Precision::fp32) {
  const bool bf16 = precision == ops::Precision::bf16;
  const double out_tolerance = bf16 ? 3e-3 : 1e-4, dqkv_tolerance = bf16 ? 5e-3 : 1e-4;
  std::mt19937_64 rng(3);
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c) + (tiled ? ", tiled" : ", reference") + (bf16 ? ", bf16" : ""));
    const int64_t B = 2, H = 2, D = c.head_dim, S = c.streams * c.tokens, HD = H * D;
    ops::AttentionLayout layout = testing::mask_layout(B, c.tokens, c.streams, c.persistent,
                                                       c.window, c.omega);
    layout.heads = H;
    layout.head_dim = D;
    const std::vector<int32_t> doc = testing::random_documents(B, c.tokens, 2, 2, rng);
    const std::vector<int32_t> doc_start = testing::document_starts(doc, B, c.tokens);
    const auto qkv = cast_vector<float>(random_vector(B * S * 3 * HD, 1));
    const auto dout = cast_vector<float>(random_vector(B * S * HD, 2));
    std::vector<float> out(B * S * HD), lse(B * H * S), dqkv(B * S * 3 * HD);
    DeviceInts d_doc(doc);
    DeviceFloats d_qkv(qkv), d_dout(dout), d_out(B * S * HD), d_lse(B * H * S),
        d_dqkv(B * S * 3 * HD);

    ops::AttentionLayout host = layout, device = layout;
    if (c.documents) {
      host.doc = doc.data();
      host.doc_start = doc_start.data();
      device.doc = d_doc.data;
    }
    ops::AttentionTilePlan plan;
    ops::plan_attention_tiles(plan, host, ops::cuda::kAttentionTile, ops::cuda::kAttentionTile);
    DeviceArray<ops::TileKind> d_kinds(plan.kinds);
    if (tiled) {
      device.tile_kinds = d_kinds.data;
      device.tile = ops::cuda::kAttentionTile;
      device.tile_pairs = plan.computed_pairs;
    }
    std::vector<float> cpu_qkv = qkv, cpu_dout = dout;
    if (bf16)
      for (std::vector<float>* v : {&cpu_qkv, &cpu_dout})
        for (float& x : *v) x = testing::round_to_bf16(x);
    ops::attention_forward(out.data(), lse.data(), cpu_qkv.data(), host);
    ops::attention_backward(dqkv.data(), cpu_dout.data(), cpu_qkv.data(), out.data(), lse.data(),
                            host);
    const int64_t pairs =
        ops::cuda::attention_forward(d_out.data, d_lse.data, d_qkv.data, device, precision);
    ops::cuda::attention_backward(d_dqkv.data, d_dout.data, d_qkv.data, d_out.data, d_lse.data,
                                  device, precision);
    EXPECT_LT(max_relative_error(d_out.read(), out), out_tolerance);
    EXPECT_LT(max_relative_error(d_lse.read(), lse), 1e-5);
    EXPECT_LT(max_relative_error(d_dqkv.read(), dqkv), dqkv_tolerance);

    int64_t visible = 0;  // per head, summed over sequences
    for (int64_t b = 0; b < B; ++b)
      for (const char v : testing::reference_mask(host, b)) visible += v;
    const bool blocked = tiled && ops::cuda::tiled_attention_applies(device);
    EXPECT_EQ(pairs, (blocked ? plan.computed_pairs : visible) * H);

    const std::vector<float> first_out = d_out.read(), first = d_dqkv.read();
    ops::cuda::attention_forward(d_out.data, d_lse.data, d_qkv.data, device, precision);
    ops::cuda::attention_backward(d_dqkv.data, d_dout.data, d_qkv.data, d_out.data, d_lse.data,
                                  device, precision);
    EXPECT_EQ(d_out.read(), first_out) << "a repeated forward differs";
    EXPECT_EQ(d_dqkv.read(), first) << "a repeated backward differs";
  }
}

std::vector<Case> every_mask(int64_t tokens, int64_t head_dim) {
  std::vector<Case> cases;
  for (const auto& [streams, persistent] : {std::pair<int64_t, int64_t>{1, 0}, {2, 0}, {2, 1}})
    for (const int64_t window : {0, 1, 3, 100})
      for (const int64_t omega : {-1, 0, 2})
        for (const bool documents : {false, true})
          cases.push_back({streams, persistent, window, omega, tokens, head_dim, documents});
  return cases;
}

TEST(CudaAttention, MatchesTheCpuBackendForEveryMask) {
  SPS_REQUIRE_GPU();
  std::vector<Case> cases = every_mask(13, 16);
  for (const int64_t T : {1, 2, 40}) cases.push_back({2, 0, 3, -1, T, 64, true});
  cases.push_back({2, 0, 5, -1, 9, 72, true});  // D not a multiple of 32
  cases.push_back({1, 0, 0, -1, 70, 128, true});
  check_against_the_cpu(cases, false);
}

// The blocked kernels over 64-token tiles: sequences of several tiles, ending inside one,
// windows within and across tiles; a head of 72 falls back to the reference kernels.
TEST(CudaAttention, BlockedKernelsMatchTheCpuBackendForEveryMask) {
  SPS_REQUIRE_GPU();
  std::vector<Case> cases = every_mask(150, 64);
  for (const int64_t T : {1, 64, 200}) cases.push_back({2, 0, 64, -1, T, 40, true});
  cases.push_back({2, 0, 64, -1, 1024, 64, true});  // the paper's window, many skipped tiles
  cases.push_back({2, 0, 5, -1, 90, 72, true});
  check_against_the_cpu(cases, true);
}

// The same on the bf16 tensor-core kernels, forward and backward, for heads they take.
TEST(CudaAttention, BlockedBf16KernelsMatchTheCpuBackendOnRoundedInputs) {
  SPS_REQUIRE_GPU();
  std::vector<Case> cases = every_mask(150, 64);
  for (const int64_t T : {1, 200}) cases.push_back({2, 0, 64, -1, T, 40, true});
  cases.push_back({2, 0, 64, -1, 1024, 64, true});
  check_against_the_cpu(cases, true, ops::Precision::bf16);
}

// A decode step (one token per sequence) on the split kernels against the CPU backend, for
// each cache; the same bits when repeated.
void check_decode(const std::vector<testing::DecodeCacheCase>& cases) {
  for (const testing::DecodeCacheCase& c : cases) {
    SCOPED_TRACE(testing::name(c));
    const testing::DecodeCache cache = testing::make_decode_cache(c);
    DeviceFloats pk(cache.pk), pv(cache.pv), rk(cache.rk), rv(cache.rv), qkv(cache.qkv),
        out(int64_t(cache.expected.size()));
    DeviceArray<int64_t> ends(cache.persistent_end);
    ops::DecodeAttentionLayout layout = cache.layout;
    layout.persistent_end = ends.data;
    std::vector<int64_t> ring(cache.ring_len);
    ring.insert(ring.end(), cache.ring_next.begin(), cache.ring_next.end());
    ring.push_back(0);  // never empty
    DeviceArray<int64_t> ring_lengths(ring);
    if (layout.ring_len) {
      layout.ring_len = ring_lengths.data;
      layout.ring_next = ring_lengths.data + cache.ring_len.size();
    }
    ops::cuda::attention_decode(out.data, qkv.data, pk.data, pv.data, rk.data, rv.data, layout);
    EXPECT_LT(max_relative_error(out.read(), cache.expected), 2e-5);
    const std::vector<float> first = out.read();
    ops::cuda::attention_decode(out.data, qkv.data, pk.data, pv.data, rk.data, rv.data, layout);
    EXPECT_EQ(out.read(), first) << "a repeated decode differs";
  }
}

TEST(CudaAttention, DecodeMatchesTheCpuBackendForEveryCache) {
  SPS_REQUIRE_GPU();
  check_decode(testing::decode_cache_cases());
}

// A small case of each attention kernel, for compute-sanitizer's racecheck (gpu-check.sh),
// which slows kernels a hundredfold: the blocked fp32 and bf16 kernels over two tiles with
// documents and a window, the reference kernels, and a decode step of an sps cache.
TEST(CudaAttention, KernelsAtSmallShapes) {
  SPS_REQUIRE_GPU();
  const std::vector<Case> cases = {{2, 0, 3, -1, 70, 64, true}, {1, 0, 0, -1, 70, 64, true}};
  check_against_the_cpu(cases, true);
  check_against_the_cpu(cases, true, ops::Precision::bf16);
  check_against_the_cpu({{2, 0, 3, -1, 13, 16, true}}, false);
  check_decode({testing::decode_cache_cases()[0]});
}

}  // namespace
}  // namespace sps
