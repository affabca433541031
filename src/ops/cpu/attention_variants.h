#pragma once
// The attention kernels (attention.cpp: ops.h's attention_forward and attention_backward,
// which prefill and scoring run too; attention_decode.cpp: the decode attention over the
// cache) as one table per build variant. A portable x86 build compiles both files twice: for
// its own target (AVX2, namespace `baseline`) and for AVX-512 (`avx512`, CMake's
// sps_ops_cpu_avx512). In training attention the queries of a tile lie in vector lanes and
// every score, probability and gradient element is its own chain of the same operations in
// the same order whatever the lane count (attention.cpp); decode sums each dot product in
// 32-byte vectors in every build, two keys to a 512-bit vector (attention_decode.cpp). So
// both give the same bits and the choice changes speed only
// (AttentionVariants.GiveTheBaselineBits, AttentionVariants.DecodeGivesTheBaselineBits).
// The process runs the variant of the vector width its packed linear chose by timing
// (linear_packed.h): that choice measures whether 512-bit vectors pay on this CPU.
#include <cstdint>
#include <vector>

#include "ops/cpu/kernel_variant.h"
#include "ops/ops.h"

namespace sps::ops {

template <typename T>
struct AttentionKernels {
  const char* variant;  // "baseline" or "avx512"
  int vector_bytes;     // the width of its vectors
  int64_t (*forward)(T* out, T* lse, const T* qkv, const AttentionLayout& layout);
  void (*backward)(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                   const AttentionLayout& layout);
  void (*decode)(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                 const T* ring_k, const T* ring_v, const DecodeAttentionLayout& layout);
  void (*decode_bf16_cache)(T* out, const T* qkv, const uint16_t* persistent_k,
                            const uint16_t* persistent_v, const uint16_t* ring_k,
                            const uint16_t* ring_v, const DecodeAttentionLayout& layout);
};

namespace baseline {
template <typename T>
const AttentionKernels<T>& attention_kernels();
}
namespace avx512 {
template <typename T>
const AttentionKernels<T>& attention_kernels();
}

// Every variant this build has and this CPU can run, the build's own first.
template <typename T>
std::vector<const AttentionKernels<T>*> runnable_attention_variants();

// The variant this process runs.
template <typename T>
const AttentionKernels<T>& attention_kernels_in_use();

}  // namespace sps::ops
