#pragma once
// The decode attention of one build variant (attention_decode.cpp, kernel_variant.h): ops.h's
// attention_decode and attention_decode_bf16_cache, which it puts into the variant's
// AttentionKernels table (attention_variants.h; attention.cpp makes the table).
#include "ops/cpu/attention_variants.h"
#include "ops/cpu/kernel_variant.h"

namespace sps::ops::SPS_KERNEL_VARIANT {

template <typename T>
void add_decode_kernels(AttentionKernels<T>& table);

}  // namespace sps::ops::SPS_KERNEL_VARIANT
