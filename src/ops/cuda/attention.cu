// Family-masked attention and decode attention on the GPU: which kernels a call takes (the
// blocked ones of attention_tiled.cuh where the layout carries a tile plan, the split decode of
// decode_attention.cuh for a step of one token, else the reference kernels of
// attention_reference.cuh) and their launches.
#include <cuda_runtime.h>

#include <cmath>

#include "ops/cuda/attention_reference.cuh"
#include "ops/cuda/attention_tiled.h"
#include "ops/cuda/check.h"
#include "ops/cuda/decode_attention.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/memory.h"

namespace sps::ops::cuda {

namespace {

using reference::kMaxPerLane;
using reference::kWarp;
using reference::kWarpsPerBlock;
constexpr int kBlockThreads = kWarp * kWarpsPerBlock;

// A zeroed pair counter, and its value once the kernel counting into it has finished.
unsigned long long* zeroed_pair_counter() {
  auto* pairs = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  check(cudaMemset(pairs, 0, sizeof(*pairs)), "attention pair count");
  return pairs;
}
int64_t read_pair_counter(const unsigned long long* pairs) {
  unsigned long long count = 0;
  copy_to_host(&count, pairs, sizeof(count));  // waits for the kernel
  return int64_t(count);
}

unsigned warp_blocks(const AttentionLayout& l) {
  const int64_t warps = l.batch * l.heads * l.streams * l.tokens;
  return unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

void check_head_dim(const AttentionLayout& l) {
  if (l.head_dim > kWarp * kMaxPerLane) fail_head_dim(l.head_dim, kWarp * kMaxPerLane);
}

}  // namespace

int64_t attention_forward(float* out, float* lse, const float* qkv, const AttentionLayout& layout,
                          Precision precision) {
  if (layout.batch * layout.tokens == 0) return 0;
  if (tiled_attention_applies(layout)) {
    tiled_attention_forward(out, lse, qkv, layout, precision);
    return layout.heads * layout.tile_pairs;
  }
  check_head_dim(layout);
  unsigned long long* pairs = zeroed_pair_counter();
  reference::forward_kernel<kBlockThreads><<<warp_blocks(layout), kBlockThreads>>>(
      out, lse, qkv, reference::mask_of(layout), 1.0f / sqrtf(float(layout.head_dim)), pairs);
  check(cudaGetLastError(), "attention forward launch");
  return read_pair_counter(pairs);
}

namespace {

constexpr int kDecodeMaxD = 64;

int multiprocessors() {
  static const int count = [] {
    int device = 0, n = 0;
    check(cudaGetDevice(&device), "current device");
    check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "multiprocessors");
    return n;
  }();
  return count;
}

// A step of one token per sequence on the split kernels of decode_attention.cuh.
void split_decode(float* out, const float* qkv, const float* persistent_k,
                  const float* persistent_v, const float* ring_k, const float* ring_v,
                  const DecodeAttentionLayout& l) {
  const int64_t persistent_rows =
      l.persistent_key_window >= 0 && l.persistent_key_window < l.persistent_capacity
          ? l.persistent_key_window
          : l.persistent_capacity;
  const int64_t ring_rows = l.window < l.ring_capacity ? l.window : l.ring_capacity;
  const int64_t splits =
      decode::decode_splits(l.batch, l.heads, persistent_rows + ring_rows, multiprocessors());
  const decode::Params p = decode::params_of(l, splits);
  const size_t partial_bytes = sizeof(float) * size_t(l.batch * l.heads * splits * l.queries *
                                                      decode::kPartialFloats<kDecodeMaxD>);
  auto* partials = static_cast<float*>(scratch(partial_bytes));
  constexpr size_t shared =
      sizeof(float) * decode::kGroups * decode::kMaxQueries * (2 + kDecodeMaxD);
  static_assert(shared <= 48 * 1024, "the split kernel's shared memory needs no opt-in");
  check_grid_rows(l.batch * l.heads, "decode attention");
  decode::split_kernel<kDecodeMaxD>
      <<<dim3(unsigned(splits), unsigned(l.batch * l.heads)), decode::kThreads, shared>>>(
          partials, qkv, persistent_k, persistent_v, ring_k, ring_v, p);
  check(cudaGetLastError(), "decode attention split launch");
  decode::merge_kernel<kDecodeMaxD>
      <<<unsigned(l.batch * l.heads), 32 * decode::kMaxQueries>>>(out, partials, qkv, p);
  check(cudaGetLastError(), "decode attention merge launch");
}

}  // namespace

void attention_decode(float* out, const float* qkv, const float* persistent_k,
                      const float* persistent_v, const float* ring_k, const float* ring_v,
                      const DecodeAttentionLayout& layout) {
  const int64_t warps = layout.batch * layout.heads * layout.tokens * layout.queries;
  if (warps == 0) return;
  if (layout.tokens == 1 && layout.queries <= decode::kMaxQueries &&
      layout.head_dim <= kDecodeMaxD) {
    split_decode(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
    return;
  }
  if (layout.head_dim > kWarp * kMaxPerLane) fail_head_dim(layout.head_dim, kWarp * kMaxPerLane);
  reference::decode_kernel<kBlockThreads>
      <<<unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock), kBlockThreads>>>(
          out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout,
          1.0f / sqrtf(float(layout.head_dim)));
  check(cudaGetLastError(), "decode attention launch");
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, const AttentionLayout& layout, Precision precision) {
  if (layout.batch * layout.tokens == 0) return;
  const int64_t stats = layout.batch * layout.heads * layout.streams * layout.tokens;
  float* delta = static_cast<float*>(scratch(size_t(stats) * sizeof(float)));
  if (tiled_attention_applies(layout)) {
    tiled_attention_backward(dqkv, delta, dout, qkv, out, lse, layout, precision);
    return;
  }
  check_head_dim(layout);
  const reference::Mask m = reference::mask_of(layout);
  const float scale = 1.0f / sqrtf(float(layout.head_dim));
  reference::query_gradient_kernel<kBlockThreads>
      <<<warp_blocks(layout), kBlockThreads>>>(dqkv, delta, dout, qkv, out, lse, m, scale);
  check(cudaGetLastError(), "attention query gradient launch");
  reference::key_gradient_kernel<kBlockThreads>
      <<<warp_blocks(layout), kBlockThreads>>>(dqkv, delta, dout, qkv, lse, m, scale);
  check(cudaGetLastError(), "attention key gradient launch");
}

}  // namespace sps::ops::cuda
