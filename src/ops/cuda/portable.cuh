#pragma once
// What the kernels written in the subset of CUDA that tests/ops/cuda_emulator.h runs on the
// CPU share (attention_tiled.cuh, decode_attention.cuh): the one dynamic shared-memory array,
// loop unrolling that keeps per-thread arrays in registers, sums over lanes, bf16 packing and
// the bf16 tensor-core product. The emulator provides its own dynamic_shared_floats(),
// float_bits(), bits_float() and mma_bf16_16x8x16(), and the CUDA keywords.
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
namespace sps::ops::cuda {

__device__ inline float* dynamic_shared_floats() {
  extern __shared__ float4 shared_memory[];
  return reinterpret_cast<float*>(shared_memory);
}

__device__ inline uint32_t float_bits(float x) { return __float_as_uint(x); }
__device__ inline float bits_float(uint32_t u) { return __uint_as_float(u); }

// d = a·b + c for one 16 × 8 × 16 tile: bf16 a (16 × 16, row-major) and b (16 × 8, column-
// major), fp32 c and d, in the fragments PTX's mma.sync.aligned.m16n8k16 gives each lane:
// with g = lane / 4 and t = lane % 4, a[0] holds a(g, 2t…2t+1), a[1] a(g+8, 2t…), a[2]
// a(g, 2t+8…), a[3] a(g+8, 2t+8…); b[0] b(2t…2t+1, g), b[1] b(2t+8…, g); c and d
// (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). The lower half of a register is the lower index.
__device__ inline void mma_bf16_16x8x16(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2], const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

}  // namespace sps::ops::cuda
#define SPS_UNROLL _Pragma("unroll")
#else
#define SPS_UNROLL
#endif

namespace sps::ops::cuda {

// The sum (max) of `value` over aligned groups of kLanes neighbouring lanes of a warp, in a
// fixed butterfly order: every lane of the group gets the result. The whole warp must call.
template <int kLanes>
__device__ inline float lane_sum(float value) {
  for (int offset = 1; offset < kLanes; offset *= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}
template <int kLanes>
__device__ inline float lane_max(float value) {
  for (int offset = 1; offset < kLanes; offset *= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// The sum (or max) of `value` over a block of kThreads threads, in a fixed tree order: the
// same bits on every run. `shared` holds kThreads values; every thread must call.
template <int kThreads, typename T, typename Combine>
__device__ T block_reduce(T value, T* shared, Combine combine) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride)
      shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();  // shared[] is reused by the next call
  return result;
}

template <int kThreads, typename T>
__device__ T block_sum(T value, T* shared) {
  return block_reduce<kThreads>(value, shared, [](T a, T b) { return a + b; });
}

template <int kThreads, typename T>
__device__ T block_max(T value, T* shared) {
  return block_reduce<kThreads>(value, shared, [](T a, T b) { return a > b ? a : b; });
}

// x rounded to bf16 (to nearest, ties to even; finite x), as its 16 bits.
__device__ inline uint32_t bf16_bits(float x) {
  const uint32_t u = float_bits(x);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// x rounded to bf16, as a float.
__device__ inline float round_bf16(float x) { return bits_float(bf16_bits(x) << 16); }

// Two bf16 in one register: `low` in the lower half.
__device__ inline uint32_t pack_bf16(float low, float high) {
  return bf16_bits(low) | (bf16_bits(high) << 16);
}

}  // namespace sps::ops::cuda
