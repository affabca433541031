#pragma once
// Launch shapes shared by the kernels (.cu files only); block reductions are in portable.cuh.
#include <cstdint>

namespace sps::ops::cuda {

constexpr int kThreads = 256;  // threads per block

// Blocks for n elements in a grid-stride loop: a fixed cap covers any n without exceeding
// the launch limits.
inline unsigned grid_stride_blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 4096 ? blocks : 4096);
}

}  // namespace sps::ops::cuda
