#pragma once
// Blocked family-masked attention over the tile plan (ops/attention_plan.h), fp32 on CUDA
// cores and bf16 on tensor cores: the forward, then the backward as two kernels (dq and Δ
// per query tile; dk and dv per key tile), each summing in a fixed order with no atomics, so
// a repeated call gives the same bits. A tile the plan marks skipped is never loaded, a full one is computed with no
// mask arithmetic, a partial one tests each pair exactly as the reference kernels do.
//
// Written in the subset of CUDA that tests/ops/cuda_emulator.h also runs on the CPU, so the
// indexing, masks and barriers are tested on every build; attention_tiled.cu compiles the
// same text for the GPU.
//
// fp32: a block of 2·kTile threads owns one tile of kTile rows (query tokens of one stream, or key
// tokens in the dk/dv kernel). Thread t holds rows 4·(t/8) … 4·(t/8) + 3, the columns
// t%8 + 8·c (c < kTile/8) of each score tile, and the head-dimension elements t%8 + 8·e
// (e < kMaxD/8) of its rows' outputs; a row's sums are combined over the 8 neighbouring
// lanes that share it. Shared buffers are transposed ([element][row or column]): a row
// buffer is read four rows at a time (float4), a column buffer one column per lane, and
// their strides keep those reads free of bank conflicts.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"
#include "ops/ops.h"

namespace sps::ops::cuda::tiled {

// ops::TileKind's values (the kernels read the plan as bytes).
constexpr uint8_t kSkipped = 0, kPartial = 1;

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// The layout's scalars and device arrays, by value.
struct Params {
  int64_t batch, tokens, streams, persistent_stream, window, persistent_key_window, heads, head_dim;
  const int32_t* doc;     // [B, T] document ids, or null (one document)
  const uint8_t* kinds;   // the plan: [B, tiles, S, S, tiles] of ops::TileKind
  int64_t tiles;          // tiles per sequence and stream
  float scale;            // 1/√D
};

// The parameters for `l` (its arrays device memory) and its tile plan of `tile`-token tiles.
inline Params params_of(const AttentionLayout& l, const uint8_t* kinds, int64_t tile) {
  return {l.batch,
          l.tokens,
          l.streams,
          l.persistent_stream,
          l.window,
          l.persistent_key_window,
          l.heads,
          l.head_dim,
          l.doc,
          kinds,
          (l.tokens + tile - 1) / tile,
          1.0f / std::sqrt(float(l.head_dim))};
}

template <int kTile, int kMaxD>
struct Shape {
  static_assert(kTile % 8 == 0 && kMaxD % 8 == 0, "lanes split tiles and heads in 8");
  static constexpr int kThreads = 2 * kTile;
  static constexpr int kCols = kTile / 8;  // score columns per thread
  static constexpr int kDims = kMaxD / 8;  // head-dimension elements per thread
  static constexpr int kRowStride = kTile + 4;  // keeps float4 reads aligned
  static constexpr int kColStride = kTile + 1;  // spreads a warp's columns over the banks
  static constexpr int kRowBuffer = kMaxD * kRowStride;
  static constexpr int kColBuffer = kMaxD * kColStride;
  static constexpr int kScoreBuffer = kTile * kRowStride;
  static constexpr int forward_floats = kRowBuffer + 2 * kColBuffer + kScoreBuffer;
  static constexpr int query_gradient_floats = 2 * kRowBuffer + 2 * kColBuffer + kScoreBuffer;
  static constexpr int key_gradient_floats =
      2 * kRowBuffer + 2 * kColBuffer + 2 * kScoreBuffer + 2 * kTile;
  // Buffers are laid end to end from a 16-byte aligned base and read as float4.
  static_assert(kRowBuffer % 4 == 0 && kColBuffer % 4 == 0 && kScoreBuffer % 4 == 0,
                "every buffer starts 16-byte aligned");
};

__device__ inline int64_t reach(const Params& p, int64_t key_stream) {
  if (key_stream != p.persistent_stream) return p.window;
  return p.persistent_key_window >= 0 ? p.persistent_key_window : p.tokens;
}

// Query (stream a, token i) sees key (stream kb, token j) of sequence b: the mask of ops.h.
__device__ inline bool visible(const Params& p, int64_t b, int64_t a, int64_t i, int64_t kb,
                               int64_t j) {
  if (i >= p.tokens || j >= p.tokens) return false;
  if (j > i || (j == i && kb > a)) return false;
  if (i - j > reach(p, kb)) return false;
  return p.doc == nullptr || p.doc[b * p.tokens + j] == p.doc[b * p.tokens + i];
}

__device__ inline uint8_t tile_kind(const Params& p, int64_t b, int64_t query_tile, int64_t a,
                                    int64_t kb, int64_t key_tile) {
  return p.kinds[(((b * p.tiles + query_tile) * p.streams + a) * p.streams + kb) * p.tiles +
                 key_tile];
}

// A tile is computed without a mask only when the plan says full and it is not cut short
// by the end of the sequence (the plan classifies real tokens only).
template <int kTile>
__device__ inline bool needs_mask(const Params& p, uint8_t kind, int64_t query_tile,
                                  int64_t key_tile) {
  return kind == kPartial || (query_tile + 1) * kTile > p.tokens ||
         (key_tile + 1) * kTile > p.tokens;
}


// dst[d · stride + r] = scale · (element d of head h of row r), for the tile's kTile rows
// starting at `first` (rows of qkv-like arrays with leading dimension ld); zero past the
// sequence (valid rows) or the head (D).
template <int kTile, int kMaxD>
__device__ void load_transposed(float* dst, int stride, const float* first, int64_t ld,
                                int64_t valid, int64_t D, float scale) {
  for (int index = threadIdx.x; index < kTile * kMaxD; index += blockDim.x) {
    const int r = index / kMaxD, d = index % kMaxD;
    const float x = r < valid && d < D ? first[r * ld + d] : 0.0f;
    dst[d * stride + r] = x * scale;
  }
}

// acc[k][c] += Σ_d rows[d][r0 + k] · cols[d][lane + 8c]: a 4 × kCols block of a tile of
// products, from a row buffer and a column buffer.
template <int kTile, int kMaxD>
__device__ void tile_products(float (&acc)[4][kTile / 8], const float* rows, const float* cols,
                              int r0, int lane) {
  using S = Shape<kTile, kMaxD>;
  for (int d = 0; d < kMaxD; ++d) {
    const float4 r = *reinterpret_cast<const float4*>(rows + d * S::kRowStride + r0);
    SPS_UNROLL
    for (int c = 0; c < S::kCols; ++c) {
      const float x = cols[d * S::kColStride + lane + 8 * c];
      acc[0][c] += r.x * x;
      acc[1][c] += r.y * x;
      acc[2][c] += r.z * x;
      acc[3][c] += r.w * x;
    }
  }
}

// out[k][e] += Σ_c scores[c][r0 + k] · cols[lane + 8e][c]: the thread's 4 rows of a score
// tile (stored [column][row]) times a column buffer ([element][column]).
template <int kTile, int kMaxD>
__device__ void score_times_columns(float (&out)[4][kMaxD / 8], const float* scores,
                                    const float* cols, int r0, int lane) {
  using S = Shape<kTile, kMaxD>;
  for (int c = 0; c < kTile; ++c) {
    const float4 s = *reinterpret_cast<const float4*>(scores + c * S::kRowStride + r0);
    SPS_UNROLL
    for (int e = 0; e < S::kDims; ++e) {
      const float x = cols[(lane + 8 * e) * S::kColStride + c];
      out[0][e] += s.x * x;
      out[1][e] += s.y * x;
      out[2][e] += s.z * x;
      out[3][e] += s.w * x;
    }
  }
}

// Writes the 4 × kCols block `v` into a score buffer ([column][row]).
template <int kTile, int kMaxD>
__device__ void store_scores(float* scores, const float (&v)[4][kTile / 8], int r0, int lane) {
  using S = Shape<kTile, kMaxD>;
  SPS_UNROLL
  for (int c = 0; c < S::kCols; ++c)
    *reinterpret_cast<float4*>(scores + (lane + 8 * c) * S::kRowStride + r0) =
        float4{v[0][c], v[1][c], v[2][c], v[3][c]};
}

// Grid: x = query tile, y = query stream, z = sequence · H + head.
template <int kTile, int kMaxD>
__global__ void __launch_bounds__(2 * kTile, 1)
    forward_kernel(float* out, float* lse, const float* qkv, Params p) {
  using S = Shape<kTile, kMaxD>;
  float* q_rows = dynamic_shared_floats();
  float* k_cols = q_rows + S::kRowBuffer;
  float* v_cols = k_cols + S::kColBuffer;
  float* p_tile = v_cols + S::kColBuffer;
  const int64_t qt = blockIdx.x, a = blockIdx.y;
  const int64_t b = blockIdx.z / p.heads, h = blockIdx.z % p.heads;
  const int64_t T = p.tokens, D = p.head_dim, HD = p.heads * D, ld = 3 * HD, St = p.streams * T;
  const int lane = threadIdx.x % 8, r0 = 4 * (threadIdx.x / 8);
  const int64_t i0 = qt * kTile;
  const float* rows = qkv + b * St * ld + h * D;  // q of slot 0 of the sequence
  load_transposed<kTile, kMaxD>(q_rows, S::kRowStride, rows + (a * T + i0) * ld, ld, T - i0, D,
                                p.scale * kLog2e);
  float running_max[4], denominator[4] = {}, acc[4][S::kDims] = {};
  SPS_UNROLL
  for (int k = 0; k < 4; ++k) running_max[k] = -INFINITY;
  for (int64_t kb = 0; kb < p.streams; ++kb)
    for (int64_t kt = 0; kt <= qt; ++kt) {
      const uint8_t kind = tile_kind(p, b, qt, a, kb, kt);
      if (kind == kSkipped) continue;
      const int64_t j0 = kt * kTile;
      __syncthreads();  // the previous tile's buffers are no longer read
      load_transposed<kTile, kMaxD>(k_cols, S::kColStride, rows + (kb * T + j0) * ld + HD, ld,
                                    T - j0, D, 1.0f);
      load_transposed<kTile, kMaxD>(v_cols, S::kColStride, rows + (kb * T + j0) * ld + 2 * HD,
                                    ld, T - j0, D, 1.0f);
      __syncthreads();
      float s[4][S::kCols] = {};
      tile_products<kTile, kMaxD>(s, q_rows, k_cols, r0, lane);
      if (needs_mask<kTile>(p, kind, qt, kt))
        SPS_UNROLL
        for (int k = 0; k < 4; ++k)
          SPS_UNROLL
          for (int c = 0; c < S::kCols; ++c)
            if (!visible(p, b, a, i0 + r0 + k, kb, j0 + lane + 8 * c)) s[k][c] = -INFINITY;
      SPS_UNROLL
      for (int k = 0; k < 4; ++k) {
        float tile_max = -INFINITY;
        SPS_UNROLL
        for (int c = 0; c < S::kCols; ++c) tile_max = fmaxf(tile_max, s[k][c]);
        const float new_max = fmaxf(running_max[k], lane_max<8>(tile_max));
        const float base = new_max == -INFINITY ? 0.0f : new_max;  // no row seen yet: no NaN
        const float correction = exp2f(running_max[k] - base);
        float sum = 0;
        SPS_UNROLL
        for (int c = 0; c < S::kCols; ++c) {
          s[k][c] = exp2f(s[k][c] - base);
          sum += s[k][c];
        }
        denominator[k] = denominator[k] * correction + sum;
        SPS_UNROLL
        for (int e = 0; e < S::kDims; ++e) acc[k][e] *= correction;
        running_max[k] = new_max;
      }
      store_scores<kTile, kMaxD>(p_tile, s, r0, lane);
      __syncthreads();
      score_times_columns<kTile, kMaxD>(acc, p_tile, v_cols, r0, lane);
    }
  SPS_UNROLL
  for (int k = 0; k < 4; ++k) {
    const int64_t i = i0 + r0 + k;
    const float total = lane_sum<8>(denominator[k]);
    if (i >= T) continue;
    const int64_t slot = a * T + i;
    float* dst = out + (b * St + slot) * HD + h * D;
    SPS_UNROLL
    for (int e = 0; e < S::kDims; ++e)
      if (lane + 8 * e < D) dst[lane + 8 * e] = acc[k][e] / total;
    if (lane == 0) lse[(b * p.heads + h) * St + slot] = (running_max[k] + log2f(total)) * kLn2;
  }
}

// dq of a query tile, and delta = Σ dout · out of each of its rows for the key kernel.
// Grid as the forward's.
template <int kTile, int kMaxD>
__global__ void __launch_bounds__(2 * kTile, 1)
    query_gradient_kernel(float* dqkv, float* delta, const float* dout, const float* qkv,
                          const float* out, const float* lse, Params p) {
  using S = Shape<kTile, kMaxD>;
  float* q_rows = dynamic_shared_floats();
  float* g_rows = q_rows + S::kRowBuffer;
  float* k_cols = g_rows + S::kRowBuffer;
  float* v_cols = k_cols + S::kColBuffer;
  float* ds_tile = v_cols + S::kColBuffer;
  const int64_t qt = blockIdx.x, a = blockIdx.y;
  const int64_t b = blockIdx.z / p.heads, h = blockIdx.z % p.heads;
  const int64_t T = p.tokens, D = p.head_dim, HD = p.heads * D, ld = 3 * HD, St = p.streams * T;
  const int lane = threadIdx.x % 8, r0 = 4 * (threadIdx.x / 8);
  const int64_t i0 = qt * kTile;
  const float* rows = qkv + b * St * ld + h * D;
  load_transposed<kTile, kMaxD>(q_rows, S::kRowStride, rows + (a * T + i0) * ld, ld, T - i0, D,
                                p.scale * kLog2e);
  load_transposed<kTile, kMaxD>(g_rows, S::kRowStride, dout + (b * St + a * T + i0) * HD + h * D,
                                HD, T - i0, D, 1.0f);
  __syncthreads();
  float row_delta[4], row_lse[4], dq[4][S::kDims] = {};
  SPS_UNROLL
  for (int k = 0; k < 4; ++k) {
    const int64_t i = i0 + r0 + k;
    float partial = 0;
    if (i < T)
      SPS_UNROLL
      for (int e = 0; e < S::kDims; ++e)
        if (lane + 8 * e < D)
          partial += g_rows[(lane + 8 * e) * S::kRowStride + r0 + k] *
                     out[(b * St + a * T + i) * HD + h * D + lane + 8 * e];
    row_delta[k] = lane_sum<8>(partial);
    row_lse[k] = i < T ? lse[(b * p.heads + h) * St + a * T + i] * kLog2e : 0.0f;
  }
  for (int64_t kb = 0; kb < p.streams; ++kb)
    for (int64_t kt = 0; kt <= qt; ++kt) {
      const uint8_t kind = tile_kind(p, b, qt, a, kb, kt);
      if (kind == kSkipped) continue;
      const int64_t j0 = kt * kTile;
      __syncthreads();
      load_transposed<kTile, kMaxD>(k_cols, S::kColStride, rows + (kb * T + j0) * ld + HD, ld,
                                    T - j0, D, 1.0f);
      load_transposed<kTile, kMaxD>(v_cols, S::kColStride, rows + (kb * T + j0) * ld + 2 * HD,
                                    ld, T - j0, D, 1.0f);
      __syncthreads();
      float s[4][S::kCols] = {}, dp[4][S::kCols] = {};
      tile_products<kTile, kMaxD>(s, q_rows, k_cols, r0, lane);
      tile_products<kTile, kMaxD>(dp, g_rows, v_cols, r0, lane);
      const bool masked = needs_mask<kTile>(p, kind, qt, kt);
      SPS_UNROLL
      for (int k = 0; k < 4; ++k)
        SPS_UNROLL
        for (int c = 0; c < S::kCols; ++c) {
          const bool seen = !masked || visible(p, b, a, i0 + r0 + k, kb, j0 + lane + 8 * c);
          const float prob = seen ? exp2f(s[k][c] - row_lse[k]) : 0.0f;
          s[k][c] = prob * (dp[k][c] - row_delta[k]);
        }
      store_scores<kTile, kMaxD>(ds_tile, s, r0, lane);
      __syncthreads();
      score_times_columns<kTile, kMaxD>(dq, ds_tile, k_cols, r0, lane);
    }
  SPS_UNROLL
  for (int k = 0; k < 4; ++k) {
    const int64_t i = i0 + r0 + k;
    if (i >= T) continue;
    const int64_t slot = a * T + i;
    float* dst = dqkv + (b * St + slot) * ld + h * D;
    SPS_UNROLL
    for (int e = 0; e < S::kDims; ++e)
      if (lane + 8 * e < D) dst[lane + 8 * e] = dq[k][e] * p.scale;
    if (lane == 0) delta[(b * p.heads + h) * St + slot] = row_delta[k];
  }
}

// dk and dv of a key tile: the sum over the query tiles of both query streams that see it,
// in stream and tile order. Grid: x = key tile, y = key stream, z = sequence · H + head.
template <int kTile, int kMaxD>
__global__ void __launch_bounds__(2 * kTile, 1)
    key_gradient_kernel(float* dqkv, const float* delta, const float* dout, const float* qkv,
                        const float* lse, Params p) {
  using S = Shape<kTile, kMaxD>;
  float* k_rows = dynamic_shared_floats();
  float* v_rows = k_rows + S::kRowBuffer;
  float* q_cols = v_rows + S::kRowBuffer;
  float* g_cols = q_cols + S::kColBuffer;
  float* p_tile = g_cols + S::kColBuffer;
  float* ds_tile = p_tile + S::kScoreBuffer;
  float* query_lse = ds_tile + S::kScoreBuffer;
  float* query_delta = query_lse + kTile;
  const int64_t kt = blockIdx.x, kb = blockIdx.y;
  const int64_t b = blockIdx.z / p.heads, h = blockIdx.z % p.heads;
  const int64_t T = p.tokens, D = p.head_dim, HD = p.heads * D, ld = 3 * HD, St = p.streams * T;
  const int lane = threadIdx.x % 8, r0 = 4 * (threadIdx.x / 8);
  const int64_t j0 = kt * kTile;
  const float* rows = qkv + b * St * ld + h * D;
  load_transposed<kTile, kMaxD>(k_rows, S::kRowStride, rows + (kb * T + j0) * ld + HD, ld, T - j0,
                                D, 1.0f);
  load_transposed<kTile, kMaxD>(v_rows, S::kRowStride, rows + (kb * T + j0) * ld + 2 * HD, ld,
                                T - j0, D, 1.0f);
  float dk[4][S::kDims] = {}, dv[4][S::kDims] = {};
  for (int64_t a = 0; a < p.streams; ++a)
    for (int64_t qt = kt; qt < p.tiles; ++qt) {
      const uint8_t kind = tile_kind(p, b, qt, a, kb, kt);
      if (kind == kSkipped) continue;
      const int64_t i0 = qt * kTile;
      __syncthreads();
      load_transposed<kTile, kMaxD>(q_cols, S::kColStride, rows + (a * T + i0) * ld, ld, T - i0,
                                    D, p.scale * kLog2e);
      load_transposed<kTile, kMaxD>(g_cols, S::kColStride,
                                    dout + (b * St + a * T + i0) * HD + h * D, HD, T - i0, D,
                                    1.0f);
      for (int c = threadIdx.x; c < kTile; c += blockDim.x) {
        const int64_t stat = (b * p.heads + h) * St + a * T + i0 + c;
        query_lse[c] = i0 + c < T ? lse[stat] * kLog2e : 0.0f;
        query_delta[c] = i0 + c < T ? delta[stat] : 0.0f;
      }
      __syncthreads();
      float s[4][S::kCols] = {}, dp[4][S::kCols] = {};
      tile_products<kTile, kMaxD>(s, k_rows, q_cols, r0, lane);
      tile_products<kTile, kMaxD>(dp, v_rows, g_cols, r0, lane);
      const bool masked = needs_mask<kTile>(p, kind, qt, kt);
      SPS_UNROLL
      for (int k = 0; k < 4; ++k)
        SPS_UNROLL
        for (int c = 0; c < S::kCols; ++c) {
          const int query = lane + 8 * c;
          const bool seen = !masked || visible(p, b, a, i0 + query, kb, j0 + r0 + k);
          s[k][c] = seen ? exp2f(s[k][c] - query_lse[query]) : 0.0f;
          dp[k][c] = s[k][c] * (dp[k][c] - query_delta[query]);
        }
      store_scores<kTile, kMaxD>(p_tile, s, r0, lane);
      store_scores<kTile, kMaxD>(ds_tile, dp, r0, lane);
      __syncthreads();
      score_times_columns<kTile, kMaxD>(dv, p_tile, g_cols, r0, lane);
      score_times_columns<kTile, kMaxD>(dk, ds_tile, q_cols, r0, lane);
    }
  SPS_UNROLL
  for (int k = 0; k < 4; ++k) {
    const int64_t j = j0 + r0 + k;
    if (j >= T) continue;
    float* dst = dqkv + (b * St + kb * T + j) * ld + h * D;
    SPS_UNROLL
    for (int e = 0; e < S::kDims; ++e)
      if (lane + 8 * e < D) {
        dst[HD + lane + 8 * e] = dk[k][e] * kLn2;  // q was scaled by scale·log2(e)
        dst[2 * HD + lane + 8 * e] = dv[k][e];
      }
  }
}

// ---- Tensor-core kernels (system.precision=bf16) ----------------------------------------
// q, k, v and dout are rounded to bf16 as they are loaded; scores, the softmax, Δ and every
// sum are fp32; P and dS are rounded to bf16 as the A operand of their products (the
// reference's bf16 autocast). A block of 4 warps owns 64 tokens of one stream (query tokens,
// or key tokens in the dk/dv kernel), 16 per warp, over the same tile plan and in the same
// order as the fp32 kernels above. Each warp keeps its rows' operands, scores and outputs in
// mma_bf16_16x8x16 fragments (portable.cuh) and reuses a score tile's fragments as the A
// operand of the next product, so P and dS never go through shared memory.
template <int kMaxD>
struct Bf16Shape {
  static_assert(kMaxD % 16 == 0, "a head is whole 16-element k-steps");
  static constexpr int kTile = 64, kThreads = 128;
  static constexpr int kSteps = kMaxD / 16;       // k-steps over a head
  static constexpr int kDimTiles = kMaxD / 8;     // 8-column fragments over a head
  static constexpr int kTileColumns = kTile / 8;  // 8-column fragments over a score tile
  // Strides (in bf16) of [row][dim] and [dim][row] buffers: a warp's fragment loads land on
  // distinct banks.
  static constexpr int kRowStride = kMaxD + 8, kKeyStride = kTile + 8;
  static constexpr int kRowBuffer = kTile * kRowStride, kColBuffer = kMaxD * kKeyStride;
  static constexpr int forward_bytes = 2 * (2 * kRowBuffer + kColBuffer);
  static constexpr int query_gradient_bytes = 2 * (4 * kRowBuffer + kColBuffer);
  static constexpr int key_gradient_bytes = 2 * (2 * kRowBuffer + 2 * kColBuffer) + 4 * 2 * kTile;
  static_assert((2 * kRowBuffer) % 16 == 0 && (2 * kColBuffer) % 16 == 0, "aligned buffers");
};

// dst[r · stride + d], or dst[d · stride + r] when transposed, = bf16 of element d of row r
// of the tile's 64 rows starting at `first`; zero past the sequence or the head.
template <int kMaxD, bool kTransposed>
__device__ void load_bf16(uint16_t* dst, int stride, const float* first, int64_t ld,
                          int64_t valid, int64_t D) {
  for (int index = threadIdx.x; index < 64 * kMaxD; index += blockDim.x) {
    const int r = index / kMaxD, d = index % kMaxD;
    const float x = r < valid && d < D ? first[r * ld + d] : 0.0f;
    dst[kTransposed ? d * stride + r : r * stride + d] = uint16_t(bf16_bits(x));
  }
}

// The two bf16 at (even) index `at` of a shared array, as one register.
__device__ inline uint32_t pair_at(const uint16_t* base, int at) {
  return *reinterpret_cast<const uint32_t*>(base + at);
}

// The lane's A fragment of k-step ks for rows row0 … row0 + 15 of a [row][k] buffer.
__device__ inline void a_fragment(uint32_t (&f)[4], const uint16_t* rows, int stride, int row0,
                                  int ks) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  SPS_UNROLL
  for (int r = 0; r < 4; ++r)
    f[r] = pair_at(rows, (row0 + g + 8 * (r % 2)) * stride + 16 * ks + 2 * t + 8 * (r / 2));
}

// s[n] = the product of a (kSteps A fragments, 16 rows) with columns 8n … 8n + 7 of a
// [column][k] buffer: a 16 × 8·kColumns tile of products.
template <int kSteps, int kColumns>
__device__ inline void fragment_products(float (&s)[kColumns][4], const uint32_t (&a)[kSteps][4],
                                         const uint16_t* columns, int stride) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  SPS_UNROLL
  for (int n = 0; n < kColumns; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    SPS_UNROLL
    for (int ks = 0; ks < kSteps; ++ks) {
      const int at = (8 * n + g) * stride + 16 * ks + 2 * t;
      const uint32_t b[2] = {pair_at(columns, at), pair_at(columns, at + 8)};
      mma_bf16_16x8x16(s[n], a[ks], b, s[n]);
    }
  }
}

// acc += scores · columns: the score tile s (its fragments rounded to bf16 as A operands,
// k-step kk over score columns 16kk … 16kk + 15) times a [column][k] buffer whose k runs
// over the score columns.
template <int kScoreColumns, int kDimTiles>
__device__ inline void accumulate_score_products(float (&acc)[kDimTiles][4],
                                                 const float (&s)[kScoreColumns][4],
                                                 const uint16_t* columns, int stride) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  SPS_UNROLL
  for (int kk = 0; kk < kScoreColumns / 2; ++kk) {
    const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                           pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                           pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
    SPS_UNROLL
    for (int dn = 0; dn < kDimTiles; ++dn) {
      const int at = (8 * dn + g) * stride + 16 * kk + 2 * t;
      const uint32_t b[2] = {pair_at(columns, at), pair_at(columns, at + 8)};
      mma_bf16_16x8x16(acc[dn], a, b, acc[dn]);
    }
  }
}

// Writes fragment rows g and g + 8 (`half` 0 and 1) of a 16 × 8·kDimTiles block, times
// `scale`, to dst[8dn + 2t + e] below D.
template <int kDimTiles>
__device__ inline void store_fragment_row(float* dst, const float (&acc)[kDimTiles][4], int half,
                                          int64_t D, float scale) {
  const int t = threadIdx.x % 4;
  SPS_UNROLL
  for (int dn = 0; dn < kDimTiles; ++dn)
    SPS_UNROLL
    for (int e = 0; e < 2; ++e)
      if (8 * dn + 2 * t + e < D) dst[8 * dn + 2 * t + e] = acc[dn][2 * half + e] * scale;
}

// Grid as forward_kernel's.
template <int kMaxD>
__global__ void __launch_bounds__(128, 1)
    forward_bf16_kernel(float* out, float* lse, const float* qkv, Params p) {
  using S = Bf16Shape<kMaxD>;
  constexpr int kTile = S::kTile;
  uint16_t* q_tile = reinterpret_cast<uint16_t*>(dynamic_shared_floats());  // [row][dim]
  uint16_t* k_tile = q_tile + S::kRowBuffer;                                  // [key][dim]
  uint16_t* v_cols = k_tile + S::kRowBuffer;                                  // [dim][key]
  const int64_t qt = blockIdx.x, a = blockIdx.y;
  const int64_t b = blockIdx.z / p.heads, h = blockIdx.z % p.heads;
  const int64_t T = p.tokens, D = p.head_dim, HD = p.heads * D, ld = 3 * HD, St = p.streams * T;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = threadIdx.x / 32 * 16;  // the warp's first row in the tile
  const int64_t i0 = qt * kTile;
  const float* rows = qkv + b * St * ld + h * D;
  load_bf16<kMaxD, false>(q_tile, S::kRowStride, rows + (a * T + i0) * ld, ld, T - i0, D);
  __syncthreads();
  uint32_t qf[S::kSteps][4];
  SPS_UNROLL
  for (int ks = 0; ks < S::kSteps; ++ks) a_fragment(qf[ks], q_tile, S::kRowStride, row0, ks);
  const float scale2 = p.scale * kLog2e;
  float running_max[2] = {-INFINITY, -INFINITY}, denominator[2] = {}, acc[S::kDimTiles][4] = {};
  for (int64_t kb = 0; kb < p.streams; ++kb)
    for (int64_t kt = 0; kt <= qt; ++kt) {
      const uint8_t kind = tile_kind(p, b, qt, a, kb, kt);
      if (kind == kSkipped) continue;
      const int64_t j0 = kt * kTile;
      __syncthreads();  // the previous tile's k and v are no longer read
      load_bf16<kMaxD, false>(k_tile, S::kRowStride, rows + (kb * T + j0) * ld + HD, ld, T - j0,
                              D);
      load_bf16<kMaxD, true>(v_cols, S::kKeyStride, rows + (kb * T + j0) * ld + 2 * HD, ld,
                             T - j0, D);
      __syncthreads();
      // s[n][·]: rows g, g + 8 of the warp × keys 8n + 2t, 8n + 2t + 1.
      float s[S::kTileColumns][4];
      fragment_products(s, qf, k_tile, S::kRowStride);
      const bool masked = needs_mask<kTile>(p, kind, qt, kt);
      SPS_UNROLL
      for (int n = 0; n < S::kTileColumns; ++n)
        SPS_UNROLL
        for (int e = 0; e < 4; ++e) {
          s[n][e] *= scale2;
          const int64_t i = i0 + row0 + g + 8 * (e / 2), j = j0 + 8 * n + 2 * t + e % 2;
          if (masked && !visible(p, b, a, i, kb, j)) s[n][e] = -INFINITY;
        }
      SPS_UNROLL
      for (int half = 0; half < 2; ++half) {  // row g, then row g + 8
        float tile_max = -INFINITY;
        SPS_UNROLL
        for (int n = 0; n < S::kTileColumns; ++n)
          tile_max = fmaxf(tile_max, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
        const float new_max = fmaxf(running_max[half], lane_max<4>(tile_max));  // a row's 4 lanes
        const float base = new_max == -INFINITY ? 0.0f : new_max;
        const float correction = exp2f(running_max[half] - base);
        float sum = 0;
        SPS_UNROLL
        for (int n = 0; n < S::kTileColumns; ++n)
          SPS_UNROLL
          for (int e = 2 * half; e < 2 * half + 2; ++e) {
            s[n][e] = exp2f(s[n][e] - base);
            sum += s[n][e];
          }
        denominator[half] = denominator[half] * correction + sum;
        SPS_UNROLL
        for (int dn = 0; dn < S::kDimTiles; ++dn) {
          acc[dn][2 * half] *= correction;
          acc[dn][2 * half + 1] *= correction;
        }
        running_max[half] = new_max;
      }
      accumulate_score_products(acc, s, v_cols, S::kKeyStride);
    }
  SPS_UNROLL
  for (int half = 0; half < 2; ++half) {
    const float total = lane_sum<4>(denominator[half]);
    const int64_t i = i0 + row0 + g + 8 * half;
    if (i >= T) continue;
    const int64_t slot = a * T + i;
    store_fragment_row(out + (b * St + slot) * HD + h * D, acc, half, D, 1.0f / total);
    if (t == 0) lse[(b * p.heads + h) * St + slot] = (running_max[half] + log2f(total)) * kLn2;
  }
}

// dq of a query tile, and Δ = Σ dout · out of each of its rows for the key kernel, on tensor
// cores: per key tile, S = q·kᵀ and dP = dout·vᵀ, then dS = P ∘ (dP − Δ) and dq += dS·k.
// Grid as forward_kernel's.
template <int kMaxD>
__global__ void __launch_bounds__(128, 1)
    query_gradient_bf16_kernel(float* dqkv, float* delta, const float* dout, const float* qkv,
                               const float* out, const float* lse, Params p) {
  using S = Bf16Shape<kMaxD>;
  constexpr int kTile = S::kTile;
  uint16_t* q_tile = reinterpret_cast<uint16_t*>(dynamic_shared_floats());  // [row][dim]
  uint16_t* g_tile = q_tile + S::kRowBuffer;  // dout, [row][dim]
  uint16_t* k_tile = g_tile + S::kRowBuffer;  // [key][dim]
  uint16_t* v_tile = k_tile + S::kRowBuffer;  // [key][dim]
  uint16_t* k_cols = v_tile + S::kRowBuffer;  // [dim][key]
  const int64_t qt = blockIdx.x, a = blockIdx.y;
  const int64_t b = blockIdx.z / p.heads, h = blockIdx.z % p.heads;
  const int64_t T = p.tokens, D = p.head_dim, HD = p.heads * D, ld = 3 * HD, St = p.streams * T;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, row0 = threadIdx.x / 32 * 16;
  const int64_t i0 = qt * kTile;
  const float* rows = qkv + b * St * ld + h * D;
  load_bf16<kMaxD, false>(q_tile, S::kRowStride, rows + (a * T + i0) * ld, ld, T - i0, D);
  load_bf16<kMaxD, false>(g_tile, S::kRowStride, dout + (b * St + a * T + i0) * HD + h * D, HD,
                          T - i0, D);
  __syncthreads();
  uint32_t qf[S::kSteps][4], gf[S::kSteps][4];
  SPS_UNROLL
  for (int ks = 0; ks < S::kSteps; ++ks) {
    a_fragment(qf[ks], q_tile, S::kRowStride, row0, ks);
    a_fragment(gf[ks], g_tile, S::kRowStride, row0, ks);
  }
  float row_delta[2], row_lse[2];  // of rows g and g + 8; the log-sum-exp in base 2
  SPS_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int r = row0 + g + 8 * half;
    const int64_t i = i0 + r;
    float partial = 0;
    if (i < T)
      for (int d = t; d < D; d += 4)
        partial += bits_float(uint32_t(g_tile[r * S::kRowStride + d]) << 16) *
                   out[(b * St + a * T + i) * HD + h * D + d];
    row_delta[half] = lane_sum<4>(partial);
    row_lse[half] = i < T ? lse[(b * p.heads + h) * St + a * T + i] * kLog2e : 0.0f;
  }
  const float scale2 = p.scale * kLog2e;
  float dq[S::kDimTiles][4] = {};
  for (int64_t kb = 0; kb < p.streams; ++kb)
    for (int64_t kt = 0; kt <= qt; ++kt) {
      const uint8_t kind = tile_kind(p, b, qt, a, kb, kt);
      if (kind == kSkipped) continue;
      const int64_t j0 = kt * kTile;
      const float* keys = rows + (kb * T + j0) * ld + HD;
      __syncthreads();
      load_bf16<kMaxD, false>(k_tile, S::kRowStride, keys, ld, T - j0, D);
      load_bf16<kMaxD, false>(v_tile, S::kRowStride, keys + HD, ld, T - j0, D);
      load_bf16<kMaxD, true>(k_cols, S::kKeyStride, keys, ld, T - j0, D);
      __syncthreads();
      float s[S::kTileColumns][4], dp[S::kTileColumns][4];
      fragment_products(s, qf, k_tile, S::kRowStride);
      fragment_products(dp, gf, v_tile, S::kRowStride);
      const bool masked = needs_mask<kTile>(p, kind, qt, kt);
      SPS_UNROLL
      for (int n = 0; n < S::kTileColumns; ++n)
        SPS_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int64_t i = i0 + row0 + g + 8 * (e / 2), j = j0 + 8 * n + 2 * t + e % 2;
          const float prob = masked && !visible(p, b, a, i, kb, j)
                                 ? 0.0f
                                 : exp2f(s[n][e] * scale2 - row_lse[e / 2]);
          s[n][e] = prob * (dp[n][e] - row_delta[e / 2]);
        }
      accumulate_score_products(dq, s, k_cols, S::kKeyStride);
    }
  SPS_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int64_t i = i0 + row0 + g + 8 * half;
    if (i >= T) continue;
    const int64_t slot = a * T + i;
    store_fragment_row(dqkv + (b * St + slot) * ld + h * D, dq, half, D, p.scale);
    if (t == 0) delta[(b * p.heads + h) * St + slot] = row_delta[half];
  }
}

// dk and dv of a key tile on tensor cores: per query tile that sees it (both query streams,
// in stream and tile order), Sᵀ = k·qᵀ and dPᵀ = v·doutᵀ, then dv += Pᵀ·dout and
// dk += dSᵀ·q. Grid as key_gradient_kernel's.
template <int kMaxD>
__global__ void __launch_bounds__(128, 1)
    key_gradient_bf16_kernel(float* dqkv, const float* delta, const float* dout, const float* qkv,
                             const float* lse, Params p) {
  using S = Bf16Shape<kMaxD>;
  constexpr int kTile = S::kTile;
  uint16_t* q_tile = reinterpret_cast<uint16_t*>(dynamic_shared_floats());  // [query][dim]
  uint16_t* g_tile = q_tile + S::kRowBuffer;  // dout, [query][dim]
  uint16_t* q_cols = g_tile + S::kRowBuffer;  // [dim][query]
  uint16_t* g_cols = q_cols + S::kColBuffer;  // dout, [dim][query]
  float* query_lse = reinterpret_cast<float*>(g_cols + S::kColBuffer);
  float* query_delta = query_lse + kTile;
  const int64_t kt = blockIdx.x, kb = blockIdx.y;
  const int64_t b = blockIdx.z / p.heads, h = blockIdx.z % p.heads;
  const int64_t T = p.tokens, D = p.head_dim, HD = p.heads * D, ld = 3 * HD, St = p.streams * T;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, row0 = threadIdx.x / 32 * 16;
  const int64_t j0 = kt * kTile;
  const float* rows = qkv + b * St * ld + h * D;
  // The key tile's k and v pass through the query buffers into the warps' A fragments.
  load_bf16<kMaxD, false>(q_tile, S::kRowStride, rows + (kb * T + j0) * ld + HD, ld, T - j0, D);
  load_bf16<kMaxD, false>(g_tile, S::kRowStride, rows + (kb * T + j0) * ld + 2 * HD, ld, T - j0,
                          D);
  __syncthreads();
  uint32_t kf[S::kSteps][4], vf[S::kSteps][4];
  SPS_UNROLL
  for (int ks = 0; ks < S::kSteps; ++ks) {
    a_fragment(kf[ks], q_tile, S::kRowStride, row0, ks);
    a_fragment(vf[ks], g_tile, S::kRowStride, row0, ks);
  }
  const float scale2 = p.scale * kLog2e;
  float dk[S::kDimTiles][4] = {}, dv[S::kDimTiles][4] = {};
  for (int64_t a = 0; a < p.streams; ++a)
    for (int64_t qt = kt; qt < p.tiles; ++qt) {
      const uint8_t kind = tile_kind(p, b, qt, a, kb, kt);
      if (kind == kSkipped) continue;
      const int64_t i0 = qt * kTile;
      const float* queries = rows + (a * T + i0) * ld;
      const float* grads = dout + (b * St + a * T + i0) * HD + h * D;
      __syncthreads();  // the previous tile (or the key tile's k and v) is no longer read
      load_bf16<kMaxD, false>(q_tile, S::kRowStride, queries, ld, T - i0, D);
      load_bf16<kMaxD, false>(g_tile, S::kRowStride, grads, HD, T - i0, D);
      load_bf16<kMaxD, true>(q_cols, S::kKeyStride, queries, ld, T - i0, D);
      load_bf16<kMaxD, true>(g_cols, S::kKeyStride, grads, HD, T - i0, D);
      for (int c = threadIdx.x; c < kTile; c += blockDim.x) {
        const int64_t stat = (b * p.heads + h) * St + a * T + i0 + c;
        query_lse[c] = i0 + c < T ? lse[stat] * kLog2e : 0.0f;
        query_delta[c] = i0 + c < T ? delta[stat] : 0.0f;
      }
      __syncthreads();
      // s[n][·]: keys g, g + 8 of the warp × queries 8n + 2t, 8n + 2t + 1.
      float s[S::kTileColumns][4], dp[S::kTileColumns][4];
      fragment_products(s, kf, q_tile, S::kRowStride);
      fragment_products(dp, vf, g_tile, S::kRowStride);
      const bool masked = needs_mask<kTile>(p, kind, qt, kt);
      SPS_UNROLL
      for (int n = 0; n < S::kTileColumns; ++n)
        SPS_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int c = 8 * n + 2 * t + e % 2;
          const int64_t j = j0 + row0 + g + 8 * (e / 2);
          s[n][e] = masked && !visible(p, b, a, i0 + c, kb, j)
                        ? 0.0f
                        : exp2f(s[n][e] * scale2 - query_lse[c]);
          dp[n][e] = s[n][e] * (dp[n][e] - query_delta[c]);
        }
      accumulate_score_products(dv, s, g_cols, S::kKeyStride);
      accumulate_score_products(dk, dp, q_cols, S::kKeyStride);
    }
  SPS_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int64_t j = j0 + row0 + g + 8 * half;
    if (j >= T) continue;
    float* dst = dqkv + (b * St + kb * T + j) * ld + h * D;
    store_fragment_row(dst + HD, dk, half, D, p.scale);
    store_fragment_row(dst + 2 * HD, dv, half, D, 1.0f);
  }
}

// Launch shapes, shared by the GPU launchers and the emulated tests.
struct Grid {
  unsigned x, y, z;
};
inline Grid tile_grid(const Params& p) {
  return {unsigned(p.tiles), unsigned(p.streams), unsigned(p.batch * p.heads)};
}

}  // namespace sps::ops::cuda::tiled
