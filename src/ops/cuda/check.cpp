#include "ops/cuda/check.h"

#include <cuda_runtime_api.h>

#include "util/error.h"

namespace sps::ops::cuda {

void check(int error, const char* what) {
  if (error != cudaSuccess)
    fail("{}: {} ({})", what, cudaGetErrorString(cudaError_t(error)),
         cudaGetErrorName(cudaError_t(error)));
}

void fail_allocation(size_t bytes, int error) {
  int device = 0;
  size_t free_bytes = 0, total = 0;
  cudaGetDevice(&device);
  cudaMemGetInfo(&free_bytes, &total);
  constexpr double kGiB = 1 << 30;
  fail("cuda:{}: cannot allocate {:.2f} GiB of device memory ({:.2f} GiB free of {:.2f}): {}",
       device, double(bytes) / kGiB, double(free_bytes) / kGiB, double(total) / kGiB,
       cudaGetErrorString(cudaError_t(error)));
}

void check_grid_rows(int64_t blocks, const char* what) {
  if (blocks > 65535)
    fail("{}: {} sequences × heads in one launch, more than a GPU grid dimension's 65,535 "
         "blocks; run fewer rows together",
         what, blocks);
}

void fail_second_device(int index, int used) {
  fail("device: cuda:{} asked for, but this process already runs on cuda:{}; a process uses one "
       "GPU (run one process per GPU under mpirun)",
       index, used);
}

void fail_head_dim(int64_t head_dim, int64_t limit) {
  fail("model config: head_dim {} is larger than the CUDA attention kernels support ({})",
       head_dim, limit);
}

}  // namespace sps::ops::cuda
