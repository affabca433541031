// Rows copied between element offsets (ops.h copy_rows).
#include <cstring>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/float_formats.h"

namespace sps::ops {

template <typename T>
void copy_rows(T* dst, const T* src, const int64_t* to, const int64_t* from, int64_t n,
               int64_t width) {
#pragma omp parallel for schedule(static) if (n * width >= cpu::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + to[i], src + from[i], sizeof(T) * size_t(width));
}

template <typename T>
void copy_rows_to_bf16(uint16_t* dst, const T* src, const int64_t* to, const int64_t* from,
                       int64_t n, int64_t width) {
#pragma omp parallel for schedule(static) if (n * width >= cpu::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < width; ++j) dst[to[i] + j] = float_to_bf16(float(src[from[i] + j]));
}

template void copy_rows<uint16_t>(uint16_t*, const uint16_t*, const int64_t*, const int64_t*,
                                  int64_t, int64_t);
template void copy_rows<float>(float*, const float*, const int64_t*, const int64_t*, int64_t,
                               int64_t);
template void copy_rows<double>(double*, const double*, const int64_t*, const int64_t*, int64_t,
                                int64_t);
template void copy_rows_to_bf16<float>(uint16_t*, const float*, const int64_t*, const int64_t*,
                                       int64_t, int64_t);
template void copy_rows_to_bf16<double>(uint16_t*, const double*, const int64_t*,
                                        const int64_t*, int64_t, int64_t);

}  // namespace sps::ops
