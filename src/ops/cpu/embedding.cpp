// Embedding lookup and its scatter-add backward.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"

namespace sps::ops {

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* table, int64_t n, int64_t d) {
  // out[n, d] = table[tokens[i], :]
#pragma omp parallel for schedule(static) if (n * d >= cpu::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * d, table + int64_t(tokens[i]) * d, sizeof(T) * d);
  }
}

template <typename T>
void embedding_backward(T* dtable, const T* dout, const int32_t* tokens, int64_t n, int64_t d) {
  // dtable[tokens[i], :] += dout[i, :]. Repeated tokens would race if rows were split
  // across threads, so each thread owns a slice of the d columns instead and walks all n
  // rows in order (deterministic, no atomics). Slices are whole cache lines.
  constexpr int64_t kLine = 64 / sizeof(T);
  const int64_t lines = (d + kLine - 1) / kLine;
#pragma omp parallel if (n * d >= cpu::kParallelThreshold)
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t begin = std::min(d, lines * thread / threads * kLine);
    const int64_t end = std::min(d, lines * (thread + 1) / threads * kLine);
    for (int64_t i = 0; i < n && begin < end; ++i) {
      T* __restrict dst = dtable + int64_t(tokens[i]) * d;
      const T* __restrict src = dout + i * d;
#pragma omp simd
      for (int64_t c = begin; c < end; ++c) dst[c] += src[c];
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, int64_t,
                                        int64_t);
template void embedding_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t);
template void embedding_backward<double>(double*, const double*, const int32_t*, int64_t,
                                         int64_t);

}  // namespace sps::ops
