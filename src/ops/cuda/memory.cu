#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"
#include "ops/cuda/memory.h"

namespace sps::ops::cuda {

void* device_allocate(size_t bytes) {
  void* pointer = nullptr;
  const cudaError_t error = cudaMalloc(&pointer, bytes);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // the runtime keeps the error until read: a later check would see it
    fail_allocation(bytes, error);
  }
  return pointer;
}

void device_free(void* pointer) { cudaFree(pointer); }

void copy_to_device(void* device, const void* host, size_t bytes) {
  check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "copy to the GPU");
}

void copy_to_host(void* host, const void* device, size_t bytes) {
  check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "copy from the GPU");
}

void copy_on_device(void* to, const void* from, size_t bytes) {
  check(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToDevice), "copy on the GPU");
}

void* scratch(size_t bytes) {
  static void* block = nullptr;
  static size_t size = 0;
  if (bytes > size) {
    if (block) device_free(block);
    block = device_allocate(bytes);
    size = bytes;
  }
  return block;
}

int64_t free_device_bytes() {
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "query the GPU's free memory");
  return int64_t(free_bytes);
}

void use_device(int index) { check(cudaSetDevice(index), "select the GPU"); }

void fill(float* x, int64_t n, float value) {
  if (n <= 0) return;
  elementwise::fill_kernel<float><<<grid_stride_blocks(n), kThreads>>>(x, n, value);
  check(cudaGetLastError(), "fill kernel launch");
}

void add(float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  elementwise::add_kernel<float><<<grid_stride_blocks(n), kThreads>>>(y, x, n);
  check(cudaGetLastError(), "add kernel launch");
}

void copy_rows(float* dst, const float* src, const int64_t* to, const int64_t* from, int64_t n,
               int64_t width) {
  if (n <= 0 || width <= 0) return;
  const unsigned blocks = unsigned(n < elementwise::kMaxRowBlocks ? n : elementwise::kMaxRowBlocks);
  elementwise::copy_rows_kernel<float>
      <<<blocks, elementwise::row_threads(width)>>>(dst, src, to, from, n, width);
  check(cudaGetLastError(), "row copy launch");
}

}  // namespace sps::ops::cuda
