// Launches AdamW (adamw.cuh: every range of the parameters in one launch, up to 64 ranges) and
// the squared norm for clipping, whose per-block sums the host adds in block order.
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "ops/cuda/adamw.cuh"
#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/memory.h"

namespace sps::ops::cuda {

void adamw_update(float* weights, const float* grads, float* m, float* v,
                  const std::vector<AdamWRange>& ranges, const AdamWStep& step) {
  const auto k = AdamWFactors<float>::of(step, step.weight_decay);
  for (const adamw::RangeTable& table : adamw::range_tables(ranges)) {
    adamw::update_kernel<adamw::kBlockThreads>
        <<<grid_stride_blocks(table.start[table.count]), adamw::kBlockThreads>>>(weights, grads, m,
                                                                                 v, table, k);
    check(cudaGetLastError(), "AdamW launch");
  }
}

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const int64_t blocks = (n + adamw::kSquaresBlockElements - 1) / adamw::kSquaresBlockElements;
  // Kept and grown, not allocated per call: freeing device memory waits for the whole GPU.
  static double* partial = nullptr;
  static int64_t capacity = 0;
  if (blocks > capacity) {
    device_free(partial);
    partial = static_cast<double*>(device_allocate(size_t(blocks) * sizeof(double)));
    capacity = blocks;
  }
  adamw::block_squares_kernel<adamw::kBlockThreads>
      <<<unsigned(blocks), adamw::kBlockThreads, adamw::kSquaresSharedBytes>>>(partial, x, n);
  check(cudaGetLastError(), "sum of squares launch");
  std::vector<double> host(blocks);
  copy_to_host(host.data(), partial, host.size() * sizeof(double));
  double total = 0;
  for (double b : host) total += b;
  return total;
}

}  // namespace sps::ops::cuda
