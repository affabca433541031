// ops.h's attention, training and decode, over the variant this process runs
// (attention_variants.h), and the tiling rule's counts (attention_tiles.h), which every
// variant shares.
#include <algorithm>
#include <vector>

#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/attention_variants.h"
#include "ops/cpu/linear_packed.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {

int64_t attention_tile_doc_min(const AttentionLayout& layout, int64_t b, int64_t i0, int64_t i1) {
  if (layout.doc_start == nullptr) return 0;
  const int32_t* starts = layout.doc_start + b * layout.tokens;
  int64_t doc_min = i0;
  for (int64_t i = i0; i < i1; ++i) {
    // A start after its own token would hide the query from itself.
    SPS_ASSERT(starts[i] <= i);
    doc_min = std::min<int64_t>(doc_min, starts[i]);
  }
  return doc_min;
}

int64_t attention_pair_count(const AttentionLayout& layout) {
  int64_t pairs = 0;
  for (int64_t b = 0; b < layout.batch; ++b)
    for (int64_t i0 = 0; i0 < layout.tokens; i0 += kAttentionQueryTile) {
      const int64_t i1 = std::min(i0 + kAttentionQueryTile, layout.tokens);
      const int64_t doc_min = attention_tile_doc_min(layout, b, i0, i1);
      for (int64_t key_stream = 0; key_stream < layout.streams; ++key_stream) {
        const AttentionKeyRange range = attention_key_range(layout, key_stream, i0, i1, doc_min);
        if (range.end > range.begin) pairs += (i1 - i0) * (range.end - range.begin);
      }
    }
  // Every query stream sees the same key ranges.
  return pairs * layout.streams * layout.heads;
}

template <typename T>
std::vector<const AttentionKernels<T>*> runnable_attention_variants() {
  std::vector<const AttentionKernels<T>*> variants{&baseline::attention_kernels<T>()};
#if SPS_KERNEL_VARIANTS
  // The AVX-512 build runs where the packed linear's AVX-512 builds do.
  const auto linear = runnable_packed_linear_variants<T>();
  if (std::any_of(linear.begin(), linear.end(), [](const auto* k) {
        return k->vector_bytes == avx512::attention_kernels<T>().vector_bytes;
      }))
    variants.push_back(&avx512::attention_kernels<T>());
#endif
  return variants;
}

template <typename T>
const AttentionKernels<T>& attention_kernels_in_use() {
  static const AttentionKernels<T>* const chosen = [] {
    const int width = packed_linear<T>().vector_bytes;
    for (const AttentionKernels<T>* k : runnable_attention_variants<T>())
      if (k->vector_bytes == width) return k;
    return &baseline::attention_kernels<T>();
  }();
  return *chosen;
}

template <typename T>
int64_t attention_forward(T* out, T* lse, const T* qkv, const AttentionLayout& layout) {
  return attention_kernels_in_use<T>().forward(out, lse, qkv, layout);
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        const AttentionLayout& layout) {
  attention_kernels_in_use<T>().backward(dqkv, dout, qkv, out, lse, layout);
}

template <typename T>
void attention_decode(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                      const T* ring_k, const T* ring_v, const DecodeAttentionLayout& layout) {
  attention_kernels_in_use<T>().decode(out, qkv, persistent_k, persistent_v, ring_k, ring_v,
                                       layout);
}

template <typename T>
void attention_decode_bf16_cache(T* out, const T* qkv, const uint16_t* persistent_k,
                                 const uint16_t* persistent_v, const uint16_t* ring_k,
                                 const uint16_t* ring_v, const DecodeAttentionLayout& layout) {
  attention_kernels_in_use<T>().decode_bf16_cache(out, qkv, persistent_k, persistent_v, ring_k,
                                                  ring_v, layout);
}

#define SPS_INSTANTIATE(T)                                                                   \
  template std::vector<const AttentionKernels<T>*> runnable_attention_variants<T>();        \
  template const AttentionKernels<T>& attention_kernels_in_use<T>();                        \
  template int64_t attention_forward<T>(T*, T*, const T*, const AttentionLayout&);          \
  template void attention_backward<T>(T*, const T*, const T*, const T*, const T*,           \
                                      const AttentionLayout&);                               \
  template void attention_decode<T>(T*, const T*, const T*, const T*, const T*, const T*,    \
                                    const DecodeAttentionLayout&);                           \
  template void attention_decode_bf16_cache<T>(T*, const T*, const uint16_t*,                \
                                               const uint16_t*, const uint16_t*,             \
                                               const uint16_t*, const DecodeAttentionLayout&);
SPS_INSTANTIATE(float)
SPS_INSTANTIATE(double)
#undef SPS_INSTANTIATE

}  // namespace sps::ops
