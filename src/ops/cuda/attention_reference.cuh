#pragma once
// The reference attention kernels on the GPU, fp32 (ops.h attention_forward / _backward /
// attention_decode), written in the subset of CUDA that tests/ops/cuda_emulator.h also runs.
// They check the blocked kernels (attention_tiled.cuh) and the split decode
// (decode_attention.cuh), and run where those do not apply: heads above 64, decode chunks of
// several tokens. One warp per query slot (forward, and the gradient of q) or per key slot
// (the gradients of k and v) walks exactly the slots the mask of ops.h lets it see, in a
// fixed order, with no atomics on floats: a repeated call gives the same bits. Each lane holds
// head-dimension elements lane, lane + 32, …; dot products are summed by a butterfly of
// shuffles, which leaves the same sum in every lane. Kernels: blocks of kThreads threads
// (kWarpsPerBlock warps), one warp per item, warps past the last item idle.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"
#include "ops/ops.h"

namespace sps::ops::cuda::reference {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 32 · 8 = 256

// The layout's scalars, passed by value to the kernels.
struct Mask {
  int64_t batch, tokens, streams, persistent_stream, window, persistent_key_window, heads, head_dim;
  const int32_t* doc;  // [B, T] or null (one document)

  __device__ int64_t slots() const { return streams * tokens; }
  // How far back (in tokens) a key of stream kb may be for any query: the window for the
  // windowed stream, ω or everything for the persistent one.
  __device__ int64_t reach(int64_t kb) const {
    if (kb != persistent_stream) return window;
    return persistent_key_window >= 0 ? persistent_key_window : tokens;
  }
  // Query (stream a, token i) sees key (stream kb, token j) of the same sequence `seq`.
  __device__ bool visible(int64_t seq, int64_t a, int64_t i, int64_t kb, int64_t j) const {
    if (j > i || (j == i && kb > a)) return false;
    if (i - j > reach(kb)) return false;
    return doc == nullptr || doc[seq * tokens + j] == doc[seq * tokens + i];
  }
};

inline Mask mask_of(const AttentionLayout& l) {
  return {l.batch, l.tokens,   l.streams, l.persistent_stream, l.window, l.persistent_key_window,
          l.heads, l.head_dim, l.doc};
}

__device__ inline float warp_sum(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Row r's head h vector of part `part` (0 q, 1 k, 2 v) of qkv [B·S, 3·H·D] into this lane's
// elements.
__device__ inline void load(float (&x)[kMaxPerLane], const float* base, int64_t D) {
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
    x[k] = e < D ? base[e] : 0.0f;
  }
}

__device__ inline float dot(const float (&x)[kMaxPerLane], const float* y, int64_t D) {
  float partial = 0;
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
    if (e < D) partial += x[k] * y[e];
  }
  return warp_sum(partial);
}

// The warp's (sequence, head, slot) from its global index, or false past the end.
__device__ inline bool warp_item(const Mask& m, int64_t& seq, int64_t& h, int64_t& slot) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int64_t S = m.slots();
  if (warp >= m.batch * m.heads * S) return false;
  slot = warp % S;
  h = (warp / S) % m.heads;
  seq = warp / (S * m.heads);
  return true;
}

// The running softmax of one query row over the keys it has absorbed so far.
struct OnlineSoftmax {
  float running_max = -INFINITY, denominator = 0;
  float acc[kMaxPerLane] = {};

  // Folds in a key with scaled score s and its value row.
  __device__ void absorb(float s, const float* value, int64_t D) {
    const float new_max = fmaxf(running_max, s);
    const float correction = expf(running_max - new_max), p = expf(s - new_max);
    denominator = denominator * correction + p;
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
      acc[k] = acc[k] * correction + (e < D ? p * value[e] : 0.0f);
    }
    running_max = new_max;
  }
  __device__ void write(float* out, int64_t D) const {
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
      if (e < D) out[e] = acc[k] / denominator;
    }
  }
};

template <int kThreads>
__global__ void __launch_bounds__(kThreads) forward_kernel(float* out, float* lse, const float* qkv, Mask m, float scale,
                               unsigned long long* pairs) {
  int64_t seq, h, slot;
  if (!warp_item(m, seq, h, slot)) return;
  const int64_t S = m.slots(), T = m.tokens, D = m.head_dim, HD = m.heads * D, ld = 3 * HD;
  const int64_t a = slot / T, i = slot % T;
  const float* rows = qkv + seq * S * ld;
  float q[kMaxPerLane];
  load(q, rows + slot * ld + h * D, D);
  OnlineSoftmax softmax;
  unsigned long long seen = 0;
  for (int64_t kb = 0; kb < m.streams; ++kb)
    for (int64_t j = i - m.reach(kb) > 0 ? i - m.reach(kb) : 0; j <= i; ++j) {
      if (!m.visible(seq, a, i, kb, j)) continue;
      const float* key = rows + (kb * T + j) * ld + HD + h * D;
      softmax.absorb(dot(q, key, D) * scale, key + HD, D);
      ++seen;
    }
  softmax.write(out + (seq * S + slot) * HD + h * D, D);
  if (threadIdx.x % kWarp == 0) {
    lse[(seq * m.heads + h) * S + slot] = softmax.running_max + logf(softmax.denominator);
    atomicAdd(pairs, seen);  // an integer: the total does not depend on the order
  }
}

// dq of one query slot, and delta = Σ dout · out for the key kernel.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) query_gradient_kernel(float* dqkv, float* delta, const float* dout,
                                      const float* qkv, const float* out, const float* lse,
                                      Mask m, float scale) {
  int64_t seq, h, slot;
  if (!warp_item(m, seq, h, slot)) return;
  const int64_t S = m.slots(), T = m.tokens, D = m.head_dim, HD = m.heads * D, ld = 3 * HD;
  const int64_t a = slot / T, i = slot % T;
  const float* rows = qkv + seq * S * ld;
  float q[kMaxPerLane], g[kMaxPerLane], dq[kMaxPerLane] = {};
  load(q, rows + slot * ld + h * D, D);
  load(g, dout + (seq * S + slot) * HD + h * D, D);
  const float d = dot(g, out + (seq * S + slot) * HD + h * D, D);
  const float l = lse[(seq * m.heads + h) * S + slot];
  for (int64_t kb = 0; kb < m.streams; ++kb)
    for (int64_t j = i - m.reach(kb) > 0 ? i - m.reach(kb) : 0; j <= i; ++j) {
      if (!m.visible(seq, a, i, kb, j)) continue;
      const float* key = rows + (kb * T + j) * ld + HD + h * D;
      const float p = expf(dot(q, key, D) * scale - l);
      const float ds = p * (dot(g, key + HD, D) - d) * scale;
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
        if (e < D) dq[k] += ds * key[e];
      }
    }
  float* dst = dqkv + (seq * S + slot) * ld + h * D;
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
    if (e < D) dst[e] = dq[k];
  }
  if (threadIdx.x % kWarp == 0) delta[(seq * m.heads + h) * S + slot] = d;
}

// dk and dv of one key slot: the sum over the query slots that see it, in slot order.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) key_gradient_kernel(float* dqkv, const float* delta, const float* dout,
                                    const float* qkv, const float* lse, Mask m, float scale) {
  int64_t seq, h, slot;
  if (!warp_item(m, seq, h, slot)) return;
  const int64_t S = m.slots(), T = m.tokens, D = m.head_dim, HD = m.heads * D, ld = 3 * HD;
  const int64_t kb = slot / T, j = slot % T;
  const float* rows = qkv + seq * S * ld;
  float key[kMaxPerLane], value[kMaxPerLane], dk[kMaxPerLane] = {}, dv[kMaxPerLane] = {};
  load(key, rows + slot * ld + HD + h * D, D);
  load(value, rows + slot * ld + 2 * HD + h * D, D);
  const int64_t last = j + m.reach(kb) < T - 1 ? j + m.reach(kb) : T - 1;
  for (int64_t a = 0; a < m.streams; ++a)
    for (int64_t i = j; i <= last; ++i) {
      if (!m.visible(seq, a, i, kb, j)) continue;
      const int64_t query = a * T + i;
      const float* q = rows + query * ld + h * D;
      const float* g = dout + (seq * S + query) * HD + h * D;
      const int64_t stat = (seq * m.heads + h) * S + query;
      const float p = expf(dot(key, q, D) * scale - lse[stat]);
      const float ds = p * (dot(value, g, D) - delta[stat]) * scale;
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
        if (e < D) {
          dk[k] += ds * q[e];
          dv[k] += p * g[e];
        }
      }
    }
  float* dst = dqkv + (seq * S + slot) * ld + h * D;
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = threadIdx.x % kWarp + int64_t(k) * kWarp;
    if (e < D) {
      dst[HD + e] = dk[k];
      dst[2 * HD + e] = dv[k];
    }
  }
}

// Decode (ops.h, attention_decode): one warp per query row of a chunk token, over the row's
// visible persistent cache rows, ring rows (newest first), earlier chunk tokens' keys and its
// own token's rows 0..r.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) decode_kernel(float* out, const float* qkv, const float* persistent_k,
                              const float* persistent_v, const float* ring_k, const float* ring_v,
                              DecodeAttentionLayout l, float scale) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (warp >= l.batch * l.heads * l.tokens * l.queries) return;
  const int64_t r = warp % l.queries, t = (warp / l.queries) % l.tokens;
  const int64_t h = (warp / (l.queries * l.tokens)) % l.heads;
  const int64_t b = warp / (l.queries * l.tokens * l.heads);
  const int64_t D = l.head_dim, HD = l.heads * D, ld = 3 * HD;
  const int64_t token_row = (b * l.tokens + t) * l.queries;  // row 0 of this token
  float q[kMaxPerLane];
  load(q, qkv + (token_row + r) * ld + h * D, D);
  OnlineSoftmax softmax;
  const auto absorb = [&](const float* key, const float* value) {
    softmax.absorb(dot(q, key, D) * scale, value, D);
  };
  // Cached persistent rows, within ω of this token.
  const int64_t end = l.persistent_end[b];
  int64_t first = 0;
  if (l.persistent_key_window >= 0 && end + t - l.persistent_key_window > 0)
    first = end + t - l.persistent_key_window;
  const int64_t head_rows = (b * l.heads + h) * l.persistent_capacity;
  for (int64_t p = first; p < end; ++p)
    absorb(persistent_k + (head_rows + p) * D, persistent_v + (head_rows + p) * D);
  // Ring rows, newest first, within w of this token.
  if (l.ring_capacity > 0 && l.ring_len != nullptr) {
    const int64_t next = l.ring_next ? l.ring_next[b] : l.ring_len[b];
    const int64_t reach = l.window - t < l.ring_len[b] ? l.window - t : l.ring_len[b];
    const int64_t ring_rows = (b * l.heads + h) * l.ring_capacity;
    for (int64_t k = 0; k < reach; ++k) {
      const int64_t row = ((next - 1 - k) % l.ring_capacity + l.ring_capacity) % l.ring_capacity;
      absorb(ring_k + (ring_rows + row) * D, ring_v + (ring_rows + row) * D);
    }
  }
  // Earlier tokens of the chunk: the persistent row within ω, the other row within w.
  for (int64_t u = 0; u < t; ++u)
    for (int64_t a = 0; a < l.queries; ++a) {
      const bool persistent = l.queries == 1 || a == l.persistent_stream;
      const int64_t limit = persistent ? l.persistent_key_window : l.window;
      if ((!persistent || limit >= 0) && t - u > limit) continue;
      const float* key = qkv + ((b * l.tokens + u) * l.queries + a) * ld + HD + h * D;
      absorb(key, key + HD);
    }
  // This token's rows 0..r (the input slot before the predict slot).
  for (int64_t a = 0; a <= r; ++a) {
    const float* key = qkv + (token_row + a) * ld + HD + h * D;
    absorb(key, key + HD);
  }
  softmax.write(out + (token_row + r) * HD + h * D, D);
}

}  // namespace sps::ops::cuda::reference
