#pragma once
// The decode attention of one build variant (attention_decode.cpp, kernel_variant.h): ops.h's
// attention_decode and attention_decode_bf16_cache, which the variant's AttentionKernels
// table (attention_variants.h) points to.
#include <cstdint>

#include "ops/cpu/kernel_variant.h"
#include "ops/ops.h"

namespace sps::ops::SPS_KERNEL_VARIANT {

template <typename T>
void attention_decode(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                      const T* ring_k, const T* ring_v, const DecodeAttentionLayout& layout);
template <typename T>
void attention_decode_bf16_cache(T* out, const T* qkv, const uint16_t* persistent_k,
                                 const uint16_t* persistent_v, const uint16_t* ring_k,
                                 const uint16_t* ring_v, const DecodeAttentionLayout& layout);

}  // namespace sps::ops::SPS_KERNEL_VARIANT
