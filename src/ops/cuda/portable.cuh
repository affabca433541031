#pragma once
// What the kernels written in the subset of CUDA that tests/ops/cuda_emulator.h runs on the
// CPU share (attention_tiled.cuh, decode_attention.cuh): the one dynamic shared-memory array,
// and loop unrolling that keeps per-thread arrays in registers. The emulator provides its
// own dynamic_shared_floats() and the CUDA keywords.
#ifdef __CUDACC__
namespace sps::ops::cuda {
__device__ inline float* dynamic_shared_floats() {
  extern __shared__ float4 shared_memory[];
  return reinterpret_cast<float*>(shared_memory);
}
}  // namespace sps::ops::cuda
#define SPS_UNROLL _Pragma("unroll")
#else
#define SPS_UNROLL
#endif
