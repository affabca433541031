// Launches the blocked attention kernels of attention_tiled.cuh: 64-token tiles, heads of up
// to 64 elements (every preset's), where the layout carries the tile plan they read.
#include <cuda_runtime.h>

#include "ops/cuda/attention_tiled.cuh"
#include "ops/cuda/attention_tiled.h"
#include "ops/cuda/check.h"

namespace sps::ops::cuda {

namespace {

constexpr int kMaxD = 64;
static_assert(tiled::kSkipped == uint8_t(TileKind::skipped) &&
              tiled::kPartial == uint8_t(TileKind::partial));
// Shared memory a block may have: 48 KB without asking, and at most 163 KB when asked on the
// smallest target (sm_80; sm_90 allows 227 KB). A kernel over either fails the build.
constexpr int kDefaultSharedBytes = 48 * 1024, kMaxSharedBytes = 163 * 1024;
using Shape = tiled::Shape<kAttentionTile, kMaxD>;
static_assert(4 * Shape::forward_floats <= kMaxSharedBytes &&
              4 * Shape::query_gradient_floats <= kMaxSharedBytes &&
              4 * Shape::key_gradient_floats <= kMaxSharedBytes);

using Bf16 = tiled::Bf16Shape<kMaxD>;
static_assert(Bf16::kTile == kAttentionTile && Bf16::forward_bytes <= kDefaultSharedBytes &&
              Bf16::query_gradient_bytes <= kDefaultSharedBytes &&
              Bf16::key_gradient_bytes <= kDefaultSharedBytes);

tiled::Params params_of(const AttentionLayout& l) {
  return tiled::params_of(l, reinterpret_cast<const uint8_t*>(l.tile_kinds), kAttentionTile);
}

// Lets `kernel` use `floats` of dynamic shared memory (above the default 48 KB), once.
template <typename Kernel>
size_t allow_shared(Kernel kernel, int floats, bool& done, const char* what) {
  const size_t bytes = sizeof(float) * size_t(floats);
  if (!done) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          what);
    done = true;
  }
  return bytes;
}

dim3 grid_of(const tiled::Params& p) {
  check_grid_rows(p.batch * p.heads, "attention");
  const tiled::Grid g = tiled::tile_grid(p);
  return dim3(g.x, g.y, g.z);
}

}  // namespace

bool tiled_attention_applies(const AttentionLayout& l) {
  return l.tile_kinds != nullptr && l.tile == kAttentionTile && l.head_dim <= kMaxD;
}

void tiled_attention_forward(float* out, float* lse, const float* qkv,
                             const AttentionLayout& layout, Precision precision) {
  const tiled::Params p = params_of(layout);
  if (precision == Precision::bf16) {
    tiled::forward_bf16_kernel<kMaxD>
        <<<grid_of(p), Bf16::kThreads, Bf16::forward_bytes>>>(out, lse, qkv, p);
    check(cudaGetLastError(), "tiled bf16 attention forward launch");
    return;
  }
  static bool ready = false;
  auto* kernel = tiled::forward_kernel<kAttentionTile, kMaxD>;
  const size_t bytes =
      allow_shared(kernel, Shape::forward_floats, ready, "tiled attention forward");
  kernel<<<grid_of(p), Shape::kThreads, bytes>>>(out, lse, qkv, p);
  check(cudaGetLastError(), "tiled attention forward launch");
}

void tiled_attention_backward(float* dqkv, float* delta, const float* dout, const float* qkv,
                              const float* out, const float* lse, const AttentionLayout& layout,
                              Precision precision) {
  const tiled::Params p = params_of(layout);
  if (precision == Precision::bf16) {
    tiled::query_gradient_bf16_kernel<kMaxD>
        <<<grid_of(p), Bf16::kThreads, Bf16::query_gradient_bytes>>>(dqkv, delta, dout, qkv, out,
                                                                     lse, p);
    check(cudaGetLastError(), "tiled bf16 attention query gradient launch");
    tiled::key_gradient_bf16_kernel<kMaxD>
        <<<grid_of(p), Bf16::kThreads, Bf16::key_gradient_bytes>>>(dqkv, delta, dout, qkv, lse, p);
    check(cudaGetLastError(), "tiled bf16 attention key gradient launch");
    return;
  }
  static bool query_ready = false, key_ready = false;
  auto* query_kernel = tiled::query_gradient_kernel<kAttentionTile, kMaxD>;
  auto* key_kernel = tiled::key_gradient_kernel<kAttentionTile, kMaxD>;
  const size_t query_bytes = allow_shared(query_kernel, Shape::query_gradient_floats, query_ready,
                                          "tiled attention query gradient");
  const size_t key_bytes = allow_shared(key_kernel, Shape::key_gradient_floats, key_ready,
                                        "tiled attention key gradient");
  query_kernel<<<grid_of(p), Shape::kThreads, query_bytes>>>(dqkv, delta, dout, qkv, out, lse, p);
  check(cudaGetLastError(), "tiled attention query gradient launch");
  key_kernel<<<grid_of(p), Shape::kThreads, key_bytes>>>(dqkv, delta, dout, qkv, lse, p);
  check(cudaGetLastError(), "tiled attention key gradient launch");
}

}  // namespace sps::ops::cuda
