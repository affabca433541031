// The blocked attention kernels of ops/cuda/attention_tiled.cuh, run on the CPU by the CUDA
// emulator, against the dense double reference: every family's mask (streams, persistent
// stream, window, ω), documents with left padding, a document id that recurs after a gap,
// sequences that end inside a tile, head sizes below the kernel's; the small-tile build
// crosses many tiles, the GPU's build (64 × 64, D ≤ 64) is run as compiled for it.
#include "cuda_emulator.h"  // first: the CUDA keywords the kernel source uses
#include "ops/cuda/attention_tiled.cuh"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "ops/attention_plan.h"
#include "ops/attention_reference.h"

namespace sps {
namespace {

namespace tiled = ops::cuda::tiled;
using testing::max_relative_error;

struct Outputs {
  std::vector<float> out, lse, dqkv;
};

// Forward and backward through the emulated kernels, the tile plan built as the backend
// builds it. layout.doc and doc_start are host arrays here.
template <int kTile, int kMaxD>
Outputs run_tiled(const std::vector<float>& qkv, const std::vector<float>& dout,
                  const ops::AttentionLayout& layout) {
  using Shape = tiled::Shape<kTile, kMaxD>;
  ops::AttentionTilePlan plan;
  ops::plan_attention_tiles(plan, layout, kTile, kTile);
  const tiled::Params p{layout.batch, layout.tokens, layout.streams, layout.persistent_stream,
                        layout.window, layout.persistent_window, layout.heads, layout.head_dim,
                        layout.doc, reinterpret_cast<const uint8_t*>(plan.kinds.data()),
                        plan.query_tiles, float(1.0 / std::sqrt(double(layout.head_dim)))};
  const int64_t S = layout.streams * layout.tokens, HD = layout.heads * layout.head_dim;
  const int64_t rows = layout.batch * S, stats = layout.batch * layout.heads * S;
  Outputs o{std::vector<float>(rows * HD), std::vector<float>(stats),
            std::vector<float>(rows * 3 * HD)};
  std::vector<float> delta(stats);
  const tiled::Grid g = tiled::tile_grid(p);
  const dim3 grid{g.x, g.y, g.z}, block{unsigned(Shape::kThreads), 1, 1};
  cuda_emulator::launch(grid, block, sizeof(float) * Shape::forward_floats,
                        tiled::forward_kernel<kTile, kMaxD>, o.out.data(), o.lse.data(),
                        qkv.data(), p);
  cuda_emulator::launch(grid, block, sizeof(float) * Shape::query_gradient_floats,
                        tiled::query_gradient_kernel<kTile, kMaxD>, o.dqkv.data(), delta.data(),
                        dout.data(), qkv.data(), static_cast<const float*>(o.out.data()),
                        static_cast<const float*>(o.lse.data()), p);
  cuda_emulator::launch(grid, block, sizeof(float) * Shape::key_gradient_floats,
                        tiled::key_gradient_kernel<kTile, kMaxD>, o.dqkv.data(),
                        static_cast<const float*>(delta.data()), dout.data(), qkv.data(),
                        static_cast<const float*>(o.lse.data()), p);
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

template <int kTile, int kMaxD>
void check_against_reference(const std::vector<Case>& cases) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "fibers switch stacks behind AddressSanitizer's back";
#endif
  std::mt19937_64 rng(11);
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    const int64_t B = 2, H = 2, S = c.streams * c.tokens, HD = H * c.head_dim;
    ops::AttentionLayout layout = testing::mask_layout(B, c.tokens, c.streams, c.persistent,
                                                       c.window, c.omega);
    layout.heads = H;
    layout.head_dim = c.head_dim;
    std::vector<int32_t> doc = testing::random_documents(B, c.tokens, 2, 3, rng);
    if (c.documents == 2) doc[c.tokens / 2] = doc[0];  // not a contiguous run
    const std::vector<int32_t> doc_start = testing::document_starts(doc, B, c.tokens);
    if (c.documents) {
      layout.doc = doc.data();
      layout.doc_start = doc_start.data();
    }
    const auto qkv = testing::random_vector(B * S * 3 * HD, 5);
    const auto dout = testing::random_vector(B * S * HD, 6);
    std::vector<double> out, lse, dqkv;
    testing::reference_attention_forward(out, lse, qkv, layout);
    testing::reference_attention_backward(dqkv, dout, qkv, layout);
    const Outputs tiled = run_tiled<kTile, kMaxD>(testing::cast_vector<float>(qkv),
                                                  testing::cast_vector<float>(dout), layout);
    EXPECT_LT(max_relative_error(tiled.out, out), 2e-5);
    EXPECT_LT(max_relative_error(tiled.lse, lse), 2e-6);
    EXPECT_LT(max_relative_error(tiled.dqkv, dqkv), 5e-5);
  }
}

TEST(AttentionTiledKernels, SmallTilesMatchTheReferenceForEveryMask) {
  std::vector<Case> cases;
  for (const auto& [streams, persistent] : {std::pair<int64_t, int64_t>{1, 0}, {2, 0}, {2, 1}})
    for (const int64_t window : {0, 3, 100})
      for (const int64_t omega : {-1, 2})
        for (const int documents : {0, 1}) cases.push_back({streams, persistent, window, omega, 37, 16, documents});
  cases.push_back({2, 0, 5, -1, 37, 10, 2});  // a head below the kernel's, a recurring id
  cases.push_back({2, 0, 17, 20, 48, 16, 1});  // whole tiles only; windows across tiles
  cases.push_back({2, 0, 3, -1, 1, 16, 0});
  check_against_reference<16, 16>(cases);
}

TEST(AttentionTiledKernels, TheGpuBuildMatchesTheReference) {
  check_against_reference<64, 64>({{2, 0, 64, -1, 130, 64, 1},
                                   {2, 1, 7, 50, 70, 40, 2},
                                   {1, 0, 0, -1, 129, 64, 1}});
}

}  // namespace
}  // namespace sps
