#pragma once
// Decode attention for a step of one new token per sequence (ops.h attention_decode with
// K = 1), fp32, split over the cache like flash-decoding: each block scans one split of one
// (sequence, head)'s cached rows — the persistent rows within ω, then the ring rows within w,
// newest first — once for all of the token's query rows (the pair step reads each cached key
// once for both slots), and writes a partial softmax (max, sum, unnormalised output) per
// query row. A second kernel merges the partials of each (sequence, head) in split order,
// adds the step's own keys (row a sees rows 0..a of its token) and normalises. Fixed
// summation order, no float atomics: a repeated call gives the same bits.
//
// Written in the subset of CUDA that tests/ops/cuda_emulator.h also runs on the CPU (see
// attention_tiled.cuh); decode_attention launches it.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"
#include "ops/ops.h"

namespace sps::ops::cuda::decode {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kThreads = 128;           // 16 groups of 8 lanes, one cached row per group
constexpr int kGroups = kThreads / 8;
constexpr int kMaxQueries = 2;

// The layout's scalars and per-sequence arrays (device memory), by value.
struct Params {
  int64_t batch, queries, heads, head_dim, window, persistent_key_window, persistent_capacity,
      ring_capacity;
  const int64_t* persistent_end;  // [B]
  const int64_t* ring_len;        // [B] or null
  const int64_t* ring_next;       // [B] or null (then ring_len)
  int64_t splits;
  float scale;  // 1/√D
};

// The parameters of a step of `l` (its arrays device memory) in `splits` splits.
inline Params params_of(const DecodeAttentionLayout& l, int64_t splits) {
  return {l.batch,
          l.queries,
          l.heads,
          l.head_dim,
          l.window,
          l.persistent_key_window,
          l.persistent_capacity,
          l.ring_capacity,
          l.persistent_end,
          l.ring_len,
          l.ring_next,
          splits,
          1.0f / std::sqrt(float(l.head_dim))};
}

// Floats of one partial: max and sum (base-2 scores), then kMaxD output sums.
template <int kMaxD>
constexpr int64_t kPartialFloats = 2 + kMaxD;

// How many splits a step uses: enough blocks for 4 per multiprocessor over all (sequence,
// head) pairs, but no split shorter than 256 of the `max_rows` cached rows a sequence can
// hold. At least 1.
inline int64_t decode_splits(int64_t batch, int64_t heads, int64_t max_rows,
                             int64_t multiprocessors) {
  const int64_t pairs = batch * heads > 0 ? batch * heads : 1;
  const int64_t to_fill = (4 * multiprocessors + pairs - 1) / pairs;
  const int64_t by_rows = (max_rows + 255) / 256;
  int64_t splits = to_fill < by_rows ? to_fill : by_rows;
  return splits > 1 ? splits : 1;
}

// The cached rows sequence b's query sees, in scan order: persistent rows [first, end), then
// `ring` ring rows newest first, from ring row next − 1 backwards.
struct RowList {
  int64_t first, persistent, ring, next;

  __device__ int64_t size() const { return persistent + ring; }
  // Row index in the persistent arrays (persistent = true) or in the ring arrays.
  __device__ int64_t row(int64_t index, int64_t ring_capacity, bool& persistent_row) const {
    persistent_row = index < persistent;
    if (persistent_row) return first + index;
    const int64_t back = next - 1 - (index - persistent);
    return (back % ring_capacity + ring_capacity) % ring_capacity;
  }
};

__device__ inline RowList rows_of(const Params& p, int64_t b) {
  RowList list{};
  const int64_t end = p.persistent_end[b];
  list.first = p.persistent_key_window >= 0 && end - p.persistent_key_window > 0
                   ? end - p.persistent_key_window
                   : 0;
  list.persistent = end - list.first;
  if (p.ring_capacity > 0 && p.ring_len != nullptr) {
    const int64_t len = p.ring_len[b];
    list.ring = p.window < len ? p.window : len;
    list.next = p.ring_next ? p.ring_next[b] : len;
  }
  return list;
}

// Grid: x = split, y = sequence · H + head. Lane l of a group of 8 holds head elements
// l + 8j (j < kMaxD/8): a group reads a row's 8 consecutive floats per load.
template <int kMaxD>
__global__ void __launch_bounds__(kThreads, 1)
    split_kernel(float* partials, const float* qkv, const float* persistent_k,
                 const float* persistent_v, const float* ring_k, const float* ring_v, Params p) {
  constexpr int kPer = kMaxD / 8;
  const int64_t split = blockIdx.x, b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t D = p.head_dim, HD = p.heads * D, Q = p.queries;
  const int group = threadIdx.x / 8, lane = threadIdx.x % 8;
  float q[kMaxQueries][kPer];
  SPS_UNROLL
  for (int r = 0; r < kMaxQueries; ++r)
    SPS_UNROLL
    for (int j = 0; j < kPer; ++j) {
      const int64_t e = lane + 8 * j;
      q[r][j] = r < Q && e < D ? qkv[(b * Q + r) * 3 * HD + h * D + e] * p.scale * kLog2e : 0.0f;
    }
  const RowList list = rows_of(p, b);
  const int64_t n = list.size(), chunk = (n + p.splits - 1) / p.splits;
  const int64_t begin = split * chunk, end = begin + chunk < n ? begin + chunk : n;
  float running_max[kMaxQueries], denominator[kMaxQueries] = {}, acc[kMaxQueries][kPer] = {};
  SPS_UNROLL
  for (int r = 0; r < kMaxQueries; ++r) running_max[r] = -INFINITY;
  // Every lane runs every round (the shuffles need the whole warp); a group past the end
  // adds nothing.
  for (int64_t base = begin; base < end; base += kGroups) {
    const int64_t index = base + group;
    const bool valid = index < end;
    float key[kPer] = {}, value[kPer] = {};
    if (valid) {
      bool persistent_row = false;
      const int64_t row = list.row(index, p.ring_capacity, persistent_row);
      const int64_t offset = ((b * p.heads + h) * (persistent_row ? p.persistent_capacity
                                                                  : p.ring_capacity) + row) * D;
      const float* k = (persistent_row ? persistent_k : ring_k) + offset;
      const float* v = (persistent_row ? persistent_v : ring_v) + offset;
      SPS_UNROLL
      for (int j = 0; j < kPer; ++j)
        if (lane + 8 * j < D) key[j] = k[lane + 8 * j], value[j] = v[lane + 8 * j];
    }
    SPS_UNROLL
    for (int r = 0; r < kMaxQueries; ++r) {
      if (r >= Q) break;  // uniform across the block
      float partial = 0;
      SPS_UNROLL
      for (int j = 0; j < kPer; ++j) partial += q[r][j] * key[j];
      const float score = lane_sum<8>(partial);
      if (!valid) continue;
      const float new_max = fmaxf(running_max[r], score);
      const float correction = exp2f(running_max[r] - new_max), weight = exp2f(score - new_max);
      denominator[r] = denominator[r] * correction + weight;
      SPS_UNROLL
      for (int j = 0; j < kPer; ++j) acc[r][j] = acc[r][j] * correction + weight * value[j];
      running_max[r] = new_max;
    }
  }
  // The 16 groups' partials, merged in group order into the split's.
  float* group_max = dynamic_shared_floats();                 // [kGroups][kMaxQueries]
  float* group_sum = group_max + kGroups * kMaxQueries;         // [kGroups][kMaxQueries]
  float* group_acc = group_sum + kGroups * kMaxQueries;         // [kGroups][kMaxQueries][kMaxD]
  SPS_UNROLL
  for (int r = 0; r < kMaxQueries; ++r) {
    if (lane == 0) {
      group_max[group * kMaxQueries + r] = running_max[r];
      group_sum[group * kMaxQueries + r] = denominator[r];
    }
    SPS_UNROLL
    for (int j = 0; j < kPer; ++j)
      group_acc[(group * kMaxQueries + r) * kMaxD + lane + 8 * j] = acc[r][j];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < Q * kMaxD; t += kThreads) {
    const int r = t / kMaxD, e = t % kMaxD;
    float top = -INFINITY;
    for (int g = 0; g < kGroups; ++g) top = fmaxf(top, group_max[g * kMaxQueries + r]);
    const float base = top == -INFINITY ? 0.0f : top;
    float sum = 0, out = 0;
    for (int g = 0; g < kGroups; ++g) {
      const float w = exp2f(group_max[g * kMaxQueries + r] - base);
      sum += group_sum[g * kMaxQueries + r] * w;
      out += group_acc[(g * kMaxQueries + r) * kMaxD + e] * w;
    }
    float* dst =
        partials + (((b * p.heads + h) * p.splits + split) * Q + r) * kPartialFloats<kMaxD>;
    dst[2 + e] = out;
    if (e == 0) dst[0] = top, dst[1] = sum;
  }
}

// Grid: x = sequence · H + head; warp r of the block finishes query row r.
template <int kMaxD>
__global__ void __launch_bounds__(32 * kMaxQueries)
    merge_kernel(float* out, const float* partials, const float* qkv, Params p) {
  constexpr int kPer = kMaxD / 32;
  const int64_t b = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
  const int64_t D = p.head_dim, HD = p.heads * D, ld = 3 * HD, Q = p.queries;
  const int r = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (r >= Q) return;  // a whole warp leaves
  float top = -INFINITY, sum = 0, acc[kPer] = {};
  // Folds a partial (max m, sum l, outputs o[e] at stride `stride`) into the running one.
  const auto fold = [&](float m, float l, const float* o, int64_t stride) {
    const float new_top = fmaxf(top, m);
    const float base = new_top == -INFINITY ? 0.0f : new_top;
    const float keep = exp2f(top - base), add = exp2f(m - base);
    sum = sum * keep + l * add;
    SPS_UNROLL
    for (int j = 0; j < kPer; ++j) {
      const int64_t e = lane + 32 * j;
      acc[j] = acc[j] * keep + (e < D ? o[e * stride] * add : 0.0f);
    }
    top = new_top;
  };
  for (int64_t s = 0; s < p.splits; ++s) {
    const float* part =
        partials + (((b * p.heads + h) * p.splits + s) * Q + r) * kPartialFloats<kMaxD>;
    fold(part[0], part[1], part + 2, 1);
  }
  // The token's own keys: row r sees rows 0..r (input before predict).
  const float* query = qkv + (b * Q + r) * ld + h * D;
  for (int64_t a = 0; a <= r; ++a) {
    const float* key = qkv + (b * Q + a) * ld + HD + h * D;
    float partial = 0;
    SPS_UNROLL
    for (int j = 0; j < kPer; ++j) {
      const int64_t e = lane + 32 * j;
      if (e < D) partial += query[e] * p.scale * kLog2e * key[e];
    }
    fold(lane_sum<32>(partial), 1.0f, key + HD, 1);
  }
  float* dst = out + (b * Q + r) * HD + h * D;
  SPS_UNROLL
  for (int j = 0; j < kPer; ++j)
    if (lane + 32 * j < D) dst[lane + 32 * j] = acc[j] / sum;
}

}  // namespace sps::ops::cuda::decode
