// Rotary position embedding, adjacent pairs (Llama-1 layout): pair j of a head is
// (x_{2j}, x_{2j+1}), rotated by pos · theta^(-2j/D).
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

// Rotates every head of n rows in place by +angle (sign = 1) or −angle (sign = −1).
template <typename T>
void rotate_rows(T* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                 int64_t row_stride, const T* cos_table, const T* sin_table, T sign) {
  SPS_ASSERT(head_dim % 2 == 0);
  const int64_t half = head_dim / 2;
#pragma omp parallel for schedule(static) if (n * heads * head_dim >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < n; ++r) {
    const T* __restrict cos_row = cos_table + int64_t(pos[r]) * half;
    const T* __restrict sin_row = sin_table + int64_t(pos[r]) * half;
    for (int64_t h = 0; h < heads; ++h) {
      T* __restrict head = x + r * row_stride + h * head_dim;
#pragma omp simd
      for (int64_t j = 0; j < half; ++j) {
        const T c = cos_row[j], s = sign * sin_row[j];
        const T even = head[2 * j], odd = head[2 * j + 1];
        head[2 * j] = even * c - odd * s;
        head[2 * j + 1] = even * s + odd * c;
      }
    }
  }
}

}  // namespace

template <typename T>
void rope_tables(T* cos_table, T* sin_table, int64_t max_pos, int64_t head_dim, double theta) {
  // cos/sin [max_pos, head_dim/2]; angles in double so long contexts keep their precision.
  SPS_ASSERT(head_dim % 2 == 0);
  const int64_t half = head_dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    const double frequency = std::pow(theta, -2.0 * double(j) / double(head_dim));
    for (int64_t p = 0; p < max_pos; ++p) {
      const double angle = double(p) * frequency;
      cos_table[p * half + j] = T(std::cos(angle));
      sin_table[p * half + j] = T(std::sin(angle));
    }
  }
}

template <typename T>
void rope_forward(T* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  int64_t row_stride, const T* cos_table, const T* sin_table) {
  rotate_rows(x, pos, n, heads, head_dim, row_stride, cos_table, sin_table, T(1));
}

template <typename T>
void rope_backward(T* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   int64_t row_stride, const T* cos_table, const T* sin_table) {
  // A rotation's transpose is the rotation by the negative angle.
  rotate_rows(dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table, T(-1));
}

template void rope_tables<float>(float*, float*, int64_t, int64_t, double);
template void rope_tables<double>(double*, double*, int64_t, int64_t, double);
template void rope_forward<float>(float*, const int32_t*, int64_t, int64_t, int64_t, int64_t,
                                  const float*, const float*);
template void rope_forward<double>(double*, const int32_t*, int64_t, int64_t, int64_t, int64_t,
                                   const double*, const double*);
template void rope_backward<float>(float*, const int32_t*, int64_t, int64_t, int64_t, int64_t,
                                   const float*, const float*);
template void rope_backward<double>(double*, const int32_t*, int64_t, int64_t, int64_t, int64_t,
                                    const double*, const double*);

}  // namespace sps::ops
