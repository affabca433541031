#pragma once
// The k most likely ids per row on the GPU (ops.h top_k_rows), written in the subset of CUDA
// that tests/ops/cuda_emulator.h also runs. One block per row, two kernels:
// - k = 1 (greedy): thread t keeps the best of ids t, t + kThreads, … (scanned in id order,
//   so its lowest id wins its ties), then the block combines the candidates pairwise in a
//   fixed tree, the lower id winning a tie.
// - k > 1: each allowed value becomes a 32-bit key that orders as the floats do (−0 as +0);
//   a radix select, 8 bits per pass from the top, finds the k-th largest key (the pivot);
//   each thread then takes the keys above the pivot, and the lowest ids of those equal to it,
//   from a contiguous range of ids, at offsets given by a prefix sum over the threads (no
//   atomics: the same candidates on every run), and a bitonic sort of (key, id) pairs puts
//   them in the CPU's order.
// Both find the lowest id holding a non-finite value first; such a row gets ids −1.
#include <cstdint>

#include "ops/cuda/portable.cuh"

namespace sps::ops::cuda::top_k {

constexpr int kBlockThreads = 256;
constexpr int kNoId = 0x7fffffff;  // "none" for the lowest non-finite id (a minimum)

__device__ inline bool finite_value(float v) {
  return (float_bits(v) & 0x7f800000u) != 0x7f800000u;
}

// The lowest id of row[0..n) whose value is not finite, kNoId when none; every thread calls.
template <int kThreads>
__device__ int32_t lowest_nonfinite(const float* row, int64_t n, int32_t* shared) {
  int32_t lowest = kNoId;
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    if (!finite_value(row[i])) {
      lowest = int32_t(i);
      break;
    }
  return block_reduce<kThreads>(lowest, shared, [](int32_t a, int32_t b) { return a < b ? a : b; });
}

// An unsigned key that orders as the value does, −0 equal to +0.
__device__ inline uint32_t order_key(float v) {
  const uint32_t u = float_bits(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Candidate (value, id) beats (best_value, best_id); id −1 is no candidate.
__device__ inline bool better(float value, int32_t id, float best_value, int32_t best_id) {
  return id >= 0 && (best_id < 0 || value > best_value || (value == best_value && id < best_id));
}

template <int kThreads>
constexpr int greedy_shared_bytes() {
  return kThreads * int(sizeof(float) + sizeof(int32_t));
}

// Grid: one block of kThreads threads per row of x [rows, n]; k = 1.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    greedy_kernel(int32_t* ids, float* values, int32_t* first_nonfinite, const float* x,
                  int64_t n, const uint8_t* banned) {
  float* best_values = dynamic_shared_floats();
  int32_t* candidates = reinterpret_cast<int32_t*>(best_values + kThreads);
  const float* row = x + int64_t(blockIdx.x) * n;
  const int32_t nonfinite = lowest_nonfinite<kThreads>(row, n, candidates);
  float best_value = 0;
  int32_t best_id = -1;
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    if (!banned[i] && (best_id < 0 || row[i] > best_value)) {
      best_value = row[i];
      best_id = int32_t(i);
    }
  best_values[threadIdx.x] = best_value;
  candidates[threadIdx.x] = best_id;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      const int other = int(threadIdx.x) + stride;
      if (better(best_values[other], candidates[other], best_values[threadIdx.x],
                 candidates[threadIdx.x])) {
        best_values[threadIdx.x] = best_values[other];
        candidates[threadIdx.x] = candidates[other];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const bool chosen = nonfinite == kNoId && candidates[0] >= 0;
    ids[blockIdx.x] = chosen ? candidates[0] : -1;
    values[blockIdx.x] = chosen ? best_values[0] : 0.0f;
    first_nonfinite[blockIdx.x] = nonfinite == kNoId ? -1 : nonfinite;
  }
}

// Shared memory of top_k_kernel: the (key, id) pairs to sort, the radix histogram, each
// thread's counts above and at the pivot, a reduction's scratch and the block's state.
template <int kThreads, int kMaxK>
constexpr int shared_bytes() {
  return kMaxK * int(sizeof(uint64_t)) + (256 + 3 * kThreads + 8) * int(sizeof(uint32_t));
}

// Grid: one block of kThreads threads per row of x [rows, n]; 2 <= k <= kMaxK (a power of 2).
template <int kThreads, int kMaxK>
__global__ void __launch_bounds__(kThreads)
    top_k_kernel(int32_t* ids, float* values, int32_t* first_nonfinite, const float* x,
                 int64_t n, const uint8_t* banned, int k) {
  uint64_t* pairs = reinterpret_cast<uint64_t*>(dynamic_shared_floats());
  uint32_t* histogram = reinterpret_cast<uint32_t*>(pairs + kMaxK);
  uint32_t* above = histogram + 256;  // [kThreads]: counts, then their exclusive prefix sums
  uint32_t* equal = above + kThreads;
  int32_t* scratch = reinterpret_cast<int32_t*>(equal + kThreads);
  // state: 0 pivot so far, 1 keys still wanted at or below it, 2 fewer allowed ids than k,
  // 3 keys above the pivot, 4 keys equal to it
  uint32_t* state = reinterpret_cast<uint32_t*>(scratch + kThreads);
  const int t = int(threadIdx.x);
  const float* row = x + int64_t(blockIdx.x) * n;
  const int32_t nonfinite = lowest_nonfinite<kThreads>(row, n, scratch);

  // The pivot: the k-th largest key among the allowed ids.
  uint32_t pivot = 0, wanted = uint32_t(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = t; b < 256; b += kThreads) histogram[b] = 0;
    __syncthreads();
    const uint32_t high = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
    for (int64_t i = t; i < n; i += kThreads) {
      if (banned[i]) continue;
      const uint32_t key = order_key(row[i]);
      if ((key & high) == pivot) atomicAdd(&histogram[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (t == 0) {
      uint32_t larger = 0;
      int digit = 255;
      while (digit >= 0 && larger + histogram[digit] < wanted) larger += histogram[digit--];
      state[2] = digit < 0;  // only the first pass can find it: it counts every allowed id
      state[0] = digit < 0 ? 0u : pivot | (uint32_t(digit) << shift);
      state[1] = digit < 0 ? 0u : wanted - larger;
    }
    __syncthreads();
    pivot = state[0];
    wanted = state[1];
    if (state[2]) break;  // take every allowed id: all keys of finite values are above 0
  }

  // Each thread's ids above and at the pivot, in a contiguous range so that the lowest ids
  // at the pivot are the first ranks of a prefix sum in thread order.
  const int64_t chunk = (n + kThreads - 1) / kThreads;
  const int64_t begin = t * chunk < n ? t * chunk : n, end = begin + chunk < n ? begin + chunk : n;
  uint32_t mine_above = 0, mine_equal = 0;
  for (int64_t i = begin; i < end; ++i) {
    if (banned[i]) continue;
    const uint32_t key = order_key(row[i]);
    mine_above += key > pivot;
    mine_equal += key == pivot;
  }
  above[t] = mine_above;
  equal[t] = mine_equal;
  __syncthreads();
  if (t == 0) {
    uint32_t sum_above = 0, sum_equal = 0;
    for (int u = 0; u < kThreads; ++u) {
      const uint32_t a = above[u], e = equal[u];
      above[u] = sum_above;
      equal[u] = sum_equal;
      sum_above += a;
      sum_equal += e;
    }
    state[3] = sum_above;
    state[4] = sum_equal;
  }
  __syncthreads();
  const uint32_t total_above = state[3];
  const uint32_t taken = total_above + (state[4] < wanted ? state[4] : wanted);
  uint32_t next_above = above[t], next_equal = equal[t];
  for (int64_t i = begin; i < end; ++i) {
    if (banned[i]) continue;
    const uint32_t key = order_key(row[i]);
    const uint64_t pair = (uint64_t(key) << 32) | uint64_t(~uint32_t(i));  // lower id: larger
    if (key > pivot) {
      pairs[next_above++] = pair;
    } else if (key == pivot) {
      if (next_equal < wanted) pairs[total_above + next_equal] = pair;
      ++next_equal;
    }
  }
  int size = 1;
  while (size < int(taken)) size *= 2;
  for (int j = int(taken) + t; j < size; j += kThreads) pairs[j] = 0;  // below every pair
  __syncthreads();

  // Bitonic sort of pairs[0..size), largest first.
  for (int width = 2; width <= size; width *= 2)
    for (int stride = width / 2; stride > 0; stride /= 2) {
      for (int j = t; j < size / 2; j += kThreads) {
        const int lo = 2 * j - (j & (stride - 1)), hi = lo + stride;
        const uint64_t a = pairs[lo], b = pairs[hi];
        if ((a < b) == ((lo & width) == 0)) {
          pairs[lo] = b;
          pairs[hi] = a;
        }
      }
      __syncthreads();
    }

  int32_t* row_ids = ids + int64_t(blockIdx.x) * k;
  float* row_values = values + int64_t(blockIdx.x) * k;
  for (int j = t; j < k; j += kThreads) {
    const bool chosen = nonfinite == kNoId && j < int(taken);
    const int32_t id = chosen ? int32_t(~uint32_t(pairs[j])) : -1;
    row_ids[j] = id;
    row_values[j] = chosen ? row[id] : 0.0f;
  }
  if (t == 0) first_nonfinite[blockIdx.x] = nonfinite == kNoId ? -1 : nonfinite;
}

}  // namespace sps::ops::cuda::top_k
