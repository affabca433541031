#pragma once
// AdamW over many ranges of the flat parameter buffers in one launch (ops.h adamw_update),
// and the squared norm for clipping (ops.h sum_squares), written in the subset of CUDA that
// tests/ops/cuda_emulator.h also runs. The ranges of a
// launch are laid end to end as one index space; each thread finds the range of its index
// by a binary search over their starts, which neighbouring threads share. The arithmetic is
// ops/cpu/adamw.cpp's, in fp32, with the factors of ops.h AdamWFactors.
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cuda/portable.cuh"
#include "ops/ops.h"

namespace sps::ops::cuda::adamw {

constexpr int kBlockThreads = 256;
constexpr int kMaxRanges = 64;  // per launch: the table travels in the kernel's parameters

// Up to kMaxRanges ranges: range r covers indices [start[r], start[r + 1]) of the launch's
// index space and elements [first[r], first[r] + length) of the buffers.
struct RangeTable {
  int64_t start[kMaxRanges + 1];
  int64_t first[kMaxRanges];
  uint64_t decayed;  // bit r: weight decay applies to range r
  int count;
};

// The ranges in launches of at most kMaxRanges, empty ones left out.
inline std::vector<RangeTable> range_tables(const std::vector<AdamWRange>& ranges) {
  std::vector<RangeTable> tables;
  for (const AdamWRange& r : ranges) {
    if (r.end <= r.begin) continue;
    if (tables.empty() || tables.back().count == kMaxRanges)
      tables.push_back(RangeTable{{0}, {0}, 0, 0});
    RangeTable& t = tables.back();
    t.first[t.count] = r.begin;
    if (r.decayed) t.decayed |= uint64_t(1) << t.count;
    t.start[t.count + 1] = t.start[t.count] + (r.end - r.begin);
    ++t.count;
  }
  return tables;
}

// Grid: any number of blocks of kThreads threads, striding over the table's index space.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    update_kernel(float* weights, const float* grads, float* m, float* v, RangeTable table,
                  AdamWFactors<float> k) {
  const int64_t total = table.start[table.count];
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * kThreads) {
    int low = 0, high = table.count;  // the last range whose start is ≤ j
    while (high - low > 1) {
      const int mid = (low + high) / 2;
      if (table.start[mid] <= j)
        low = mid;
      else
        high = mid;
    }
    const int64_t i = table.first[low] + (j - table.start[low]);
    const float decay = (table.decayed >> low) & 1 ? k.decay : 1.0f;
    const float g = grads[i] * k.scale;
    const float mi = k.b1 * m[i] + k.one_minus_b1 * g;
    const float vi = k.b2 * v[i] + k.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) * k.inv_sqrt_bias2 + k.eps;
    weights[i] = weights[i] * decay - k.step_size * mi / denom;
  }
}

constexpr int64_t kSquaresBlockElements = int64_t(1) << 16;  // elements one block sums
constexpr int kSquaresSharedBytes = kBlockThreads * int(sizeof(double));

// Σ x[i]² in double for the clip's global norm: block b sums elements [b·2¹⁶, (b + 1)·2¹⁶)
// into partial[b], each thread a strided share and then a fixed tree over the threads; the
// host adds the partials in block order. Grid: ⌈n / 2¹⁶⌉ blocks.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    block_squares_kernel(double* partial, const float* x, int64_t n) {
  double* shared = reinterpret_cast<double*>(dynamic_shared_floats());
  const int64_t begin = blockIdx.x * kSquaresBlockElements;
  const int64_t end = begin + kSquaresBlockElements < n ? begin + kSquaresBlockElements : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) sum += double(x[i]) * double(x[i]);
  sum = block_sum<kThreads>(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

}  // namespace sps::ops::cuda::adamw
