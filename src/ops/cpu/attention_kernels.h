#pragma once
// The building blocks of the CPU attention kernels (attention.cpp for training,
// attention_decode.cpp for the decoder's extends): queries held transposed in the vector lanes
// of a tile, scores St[key][query], one register-blocked product kernel, the lane-wise mask of
// visible key ranges and the online softmax. See attention.cpp's opening comment.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/kernel_variant.h"

// In the namespace of the build variant (kernel_variant.h): attention.cpp is compiled once per
// vector width, and each build's tiles must stay its own.
namespace sps::ops::SPS_KERNEL_VARIANT::tiles {

using cpu::kVecBytes;
using cpu::load;
using cpu::store;

// Query rows per tile (the lanes the kernels below work on). Keys per online-softmax step
// are each kernel's own: kAttentionKeyChunk in attention.cpp, kDecodeKeyChunk in decode.
inline constexpr int64_t kTile = kAttentionQueryTile;

// Rows of the micro-kernel: rows × 4 accumulators + 4 B vectors must fit the register file
// (32 vectors with AVX-512, whose width kVecBytes == 64 stands for, and on ARM; 16 on AVX2).
#if defined(__aarch64__)
constexpr int kMicroRows = 6;
#else
constexpr int kMicroRows = kVecBytes == 64 ? 6 : 3;
#endif

// Native vectors of T, and integer vectors with the same lane count (for lane compares).
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  typedef float V __attribute__((vector_size(kVecBytes)));
  typedef int32_t I __attribute__((vector_size(kVecBytes)));
  using Int = int32_t;
};
template <>
struct Simd<double> {
  typedef double V __attribute__((vector_size(kVecBytes)));
  typedef int64_t I __attribute__((vector_size(kVecBytes)));
  using Int = int64_t;
};

template <typename T>
constexpr int kLanes = kVecBytes / int(sizeof(T));
static_assert(kTile % kLanes<float> == 0 && kTile % kLanes<double> == 0);

template <typename V>
inline V vmax(V a, V b) {
  return a > b ? a : b;
}

// exp on a vector: cpu::exp_lanes, the exp of every other CPU op, lane by lane. double
// (tests only): the library exp per lane.
inline Simd<float>::V vexp(Simd<float>::V x) { return cpu::exp_vector(x); }
inline Simd<double>::V vexp(Simd<double>::V x) {
  for (int lane = 0; lane < kLanes<double>; ++lane) x[lane] = std::exp(x[lane]);
  return x;
}

// 64-byte aligned scratch that only grows, one set per thread: after the first call with the
// same shapes nothing allocates.
template <typename T>
class Scratch {
 public:
  T* get(size_t n) {
    if (n > size_) {
      data_.reset(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t(64))));
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<T, Free> data_;
  size_t size_ = 0;
};

template <typename T>
struct TileScratch {
  Scratch<T> qt, qs, st, dpt, ot, dot, dos;
  Scratch<T> head_kv;   // [2, S, D] K and V of the head being worked on, packed
  Scratch<T> head_dkv;  // [2, S, D] its dK and dV (backward)

  // Every buffer at its size for head_dim D, so that a thread's first tile in a later call
  // cannot allocate either.
  void reserve(int64_t D) {
    for (Scratch<T>* s : {&qt, &qs, &ot, &dot, &dos}) s->get(D * kAttentionQueryTile);
    st.get(kAttentionKeyChunk * kAttentionQueryTile);
    dpt.get(kAttentionKeyChunk * kAttentionQueryTile);
  }
};
template <typename T>
TileScratch<T>& thread_tile_scratch() {
  thread_local TileScratch<T> scratch;
  return scratch;
}

// ---- the small product kernel --------------------------------------------------------
// C[M, N] (op)= Σ_k a(i, k) · B[k, :], a(i, k) = A[i·lda + k], or A[k·lda + i] when kTransA.
enum class Store { overwrite, accumulate, scale_columns };  // last: C = C ⊙ col_scale + Σ

template <typename T, int R, int NV, bool kTransA>
inline void micro_kernel(T* C, int64_t ldc, const T* A, int64_t lda, const T* B, int64_t ldb,
                         int64_t K, Store mode, const T* col_scale) {
  using V = typename Simd<T>::V;
  constexpr int W = kLanes<T>;
  V acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < NV; ++u) acc[i][u] = V{};
  for (int64_t k = 0; k < K; ++k) {
    const T* b = B + k * ldb;
    V bv[NV];
    for (int u = 0; u < NV; ++u) bv[u] = load<V>(b + u * W);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const T a = kTransA ? A[k * lda + i] : A[i * lda + k];
      for (int u = 0; u < NV; ++u) acc[i][u] += a * bv[u];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < NV; ++u) {
      T* c = C + i * ldc + u * W;
      if (mode == Store::overwrite)
        store(c, acc[i][u]);
      else if (mode == Store::accumulate)
        store(c, load<V>(c) + acc[i][u]);
      else
        store(c, load<V>(c) * load<V>(col_scale + u * W) + acc[i][u]);
    }
}

// The last rem < kMicroRows rows, by the instantiation with exactly rem rows.
template <typename T, int NV, bool kTransA, int R>
inline void micro_tail(int64_t rem, T* C, int64_t ldc, const T* A, int64_t lda, const T* B,
                       int64_t ldb, int64_t K, Store mode, const T* col_scale) {
  if constexpr (R >= 1) {
    if (rem == R)
      micro_kernel<T, R, NV, kTransA>(C, ldc, A, lda, B, ldb, K, mode, col_scale);
    else
      micro_tail<T, NV, kTransA, R - 1>(rem, C, ldc, A, lda, B, ldb, K, mode, col_scale);
  }
}

template <typename T, int NV, bool kTransA>
inline void micro_rows(T* C, int64_t ldc, const T* A, int64_t lda, const T* B, int64_t ldb,
                       int64_t M, int64_t K, Store mode, const T* col_scale) {
  int64_t m = 0;
  for (; m + kMicroRows <= M; m += kMicroRows)
    micro_kernel<T, kMicroRows, NV, kTransA>(C + m * ldc, ldc, kTransA ? A + m : A + m * lda, lda,
                                             B, ldb, K, mode, col_scale);
  micro_tail<T, NV, kTransA, kMicroRows - 1>(M - m, C + m * ldc, ldc, kTransA ? A + m : A + m * lda,
                                             lda, B, ldb, K, mode, col_scale);
}

template <typename T, bool kTransA>
void tile_product(T* C, int64_t ldc, const T* A, int64_t lda, const T* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K, Store mode, const T* col_scale = nullptr) {
  constexpr int W = kLanes<T>;
  int64_t n = 0;
  for (; n + 4 * W <= N; n += 4 * W)
    micro_rows<T, 4, kTransA>(C + n, ldc, A, lda, B + n, ldb, M, K, mode,
                              col_scale ? col_scale + n : nullptr);
  for (; n + W <= N; n += W)
    micro_rows<T, 1, kTransA>(C + n, ldc, A, lda, B + n, ldb, M, K, mode,
                              col_scale ? col_scale + n : nullptr);
  // Head dims that are not a multiple of the vector width: the lanes' chain in scalars, fused
  // as GCC fuses the vector kernel's `a * b + c`, so that each width gives the same bits
  // whichever of its columns fall in the tail (attention_variants.h).
  for (; n < N; ++n)
    for (int64_t i = 0; i < M; ++i) {
      T sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum = cpu::fused_multiply_add(kTransA ? A[k * lda + i] : A[i * lda + k], B[k * ldb + n],
                                      sum);
      T& c = C[i * ldc + n];
      c = mode == Store::overwrite    ? sum
          : mode == Store::accumulate ? c + sum
                                      : cpu::fused_multiply_add(c, col_scale[n], sum);
    }
}

// ---- one query tile --------------------------------------------------------------------
// Lane r holds query token i0 + r; lanes past the stream's end repeat the last query (so
// their probabilities stay bounded) with dO = 0 (so they add nothing to dK, dV).
template <typename T>
struct TileLanes {
  using Int = typename Simd<T>::Int;
  alignas(64) Int token[kTile];
  alignas(64) Int doc[kTile];
  alignas(64) Int key_lo[kTile];  // smallest visible key token (per key stream)
  alignas(64) Int key_hi[kTile];  // largest visible key token
};

// Scores of keys [j0, j0 + n) that a lane may not see become −∞.  st: [n, kTile]
template <typename T>
void mask_scores(T* st, int64_t n, int64_t j0, const int32_t* key_doc, const TileLanes<T>& lanes) {
  using V = typename Simd<T>::V;
  using I = typename Simd<T>::I;
  using Int = typename Simd<T>::Int;
  constexpr int W = kLanes<T>;
  const V minus_inf = V{} - std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < n; ++c) {
    const I j = I{} + Int(j0 + c);
    const I dj = I{} + Int(key_doc ? key_doc[j0 + c] : 0);
    T* row = st + c * kTile;
    for (int u = 0; u < kTile / W; ++u) {
      const I visible = (load<I>(lanes.key_lo + u * W) <= j) &
                        (j <= load<I>(lanes.key_hi + u * W)) & (load<I>(lanes.doc + u * W) == dj);
      store(row + u * W, visible ? load<V>(row + u * W) : minus_inf);
    }
  }
}

// Online softmax over one chunk of scores: updates the running max m and sum l per lane,
// turns st into exp(st − m_new), and returns in alpha the factor for the older sums.
template <typename T>
void online_softmax(T* st, int64_t n, T* m, T* l, T* alpha) {
  using V = typename Simd<T>::V;
  constexpr int W = kLanes<T>;
  constexpr int NV = kTile / W;
  const V minus_inf = V{} - std::numeric_limits<T>::infinity();
  V chunk_max[NV], shift[NV], sum[NV];
  for (int u = 0; u < NV; ++u) chunk_max[u] = minus_inf, sum[u] = V{};
  for (int64_t c = 0; c < n; ++c)
    for (int u = 0; u < NV; ++u) chunk_max[u] = vmax(chunk_max[u], load<V>(st + c * kTile + u * W));
  for (int u = 0; u < NV; ++u) {
    const V old_max = load<V>(m + u * W);
    const V new_max = vmax(old_max, chunk_max[u]);
    shift[u] = new_max == minus_inf ? V{} : new_max;  // a lane with nothing seen yet stays 0
    store(alpha + u * W, vexp(old_max - shift[u]));
    store(m + u * W, new_max);
  }
  for (int64_t c = 0; c < n; ++c)
    for (int u = 0; u < NV; ++u) {
      const V p = vexp(load<V>(st + c * kTile + u * W) - shift[u]);
      store(st + c * kTile + u * W, p);
      sum[u] += p;
    }
  for (int u = 0; u < NV; ++u)
    store(l + u * W, load<V>(alpha + u * W) * load<V>(l + u * W) + sum[u]);
}

// Writes scale·Qᵀ of the tile, [D, kTile] (padded lanes repeat the last query), and
// scale·Q, [kTile, D], when qs is given.
template <typename T>
void load_queries(T* qt, T* qs, const T* q, int64_t ld, int64_t rows, int64_t D, T scale) {
  for (int64_t r = 0; r < kTile; ++r)
    for (int64_t d = 0; d < D; ++d) {
      const T value = q[std::min(r, rows - 1) * ld + d] * scale;
      qt[d * kTile + r] = value;
      if (qs) qs[r * D + d] = value;
    }
}

}  // namespace sps::ops::SPS_KERNEL_VARIANT::tiles

namespace sps::ops {
namespace tiles = SPS_KERNEL_VARIANT::tiles;
}
