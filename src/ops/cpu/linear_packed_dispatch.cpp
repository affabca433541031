// ops.h's packed linear over the variant this process runs (linear_packed.h): the build's own
// kernels, or their AVX-512 build where the CPU has AVX-512 and it measured faster.
#include <vector>

#include "ops/cpu/linear_packed.h"
#include "ops/ops.h"
#include "util/process_stats.h"

namespace sps::ops {
namespace {

#if SPS_AVX512_VARIANT
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

// The median time of a few multiplies of 16 rows by a 512 × 512 f32 weight, packed by the
// variant itself (its panels differ from the other's).
template <typename T>
double seconds_per_multiply(const PackedLinearKernels<T>& k) {
  constexpr int64_t n = 512, rows = 16;
  std::vector<T> weight(n * n), in(rows * n), out(rows * n);
  for (int64_t i = 0; i < n * n; ++i) weight[i] = T(i % 7 - 3) / T(64);
  for (int64_t i = 0; i < rows * n; ++i) in[i] = T(i % 5 - 2) / T(8);
  std::vector<uint8_t> packed(size_t(k.weight_bytes(WeightType::f32, n, n)));
  k.pack_weight_rows(WeightType::f32, packed.data(), weight.data(), 0, n, n, n, "a timing weight");
  std::vector<double> seconds;
  for (int run = 0; run < 4; ++run) {
    const double start = now_seconds();
    k.forward(out.data(), in.data(), packed.data(), WeightType::f32, rows, n, n, false);
    if (run > 0) seconds.push_back(now_seconds() - start);  // the first warms the caches
  }
  return median(seconds);
}

}  // namespace

template <typename T>
std::vector<const PackedLinearKernels<T>*> runnable_packed_linear_variants() {
  std::vector<const PackedLinearKernels<T>*> variants{&baseline::packed_linear_kernels<T>()};
#if SPS_AVX512_VARIANT
  if (cpu_has_avx512()) variants.push_back(&avx512::packed_linear_kernels<T>());
#endif
  return variants;
}

template <typename T>
const PackedLinearKernels<T>& packed_linear() {
  static const PackedLinearKernels<T>* const chosen = [] {
    const std::vector<const PackedLinearKernels<T>*> variants = runnable_packed_linear_variants<T>();
    const PackedLinearKernels<T>* best = variants.front();
    if (variants.size() > 1) {
      double best_seconds = seconds_per_multiply(*best);
      for (size_t i = 1; i < variants.size(); ++i) {
        const double seconds = seconds_per_multiply(*variants[i]);
        if (seconds < best_seconds) best = variants[i], best_seconds = seconds;
      }
    }
    return best;
  }();
  return *chosen;
}

template <typename T>
int64_t packed_panel_rows() {
  return packed_linear<T>().panel_rows();
}
template <typename T>
int64_t packed_weight_bytes(WeightType type, int64_t in_dim, int64_t out_dim) {
  return packed_linear<T>().weight_bytes(type, in_dim, out_dim);
}
template <typename T>
void pack_weight_rows(WeightType type, void* packed, const T* rows, int64_t first_row,
                      int64_t row_count, int64_t in_dim, int64_t out_dim, const std::string& what) {
  packed_linear<T>().pack_weight_rows(type, packed, rows, first_row, row_count, in_dim, out_dim,
                                      what);
}
template <typename T>
void linear_packed_forward(T* out, const T* in, const void* packed, WeightType type, int64_t rows,
                           int64_t in_dim, int64_t out_dim, bool accumulate) {
  packed_linear<T>().forward(out, in, packed, type, rows, in_dim, out_dim, accumulate);
}
template <typename T>
void embedding_packed_forward(T* out, const int32_t* tokens, const void* packed, WeightType type,
                              int64_t n, int64_t d, int64_t V) {
  packed_linear<T>().embedding(out, tokens, packed, type, n, d, V);
}

#define SPS_INSTANTIATE(T)                                                                        \
  template std::vector<const PackedLinearKernels<T>*> runnable_packed_linear_variants<T>();       \
  template const PackedLinearKernels<T>& packed_linear<T>();                                      \
  template int64_t packed_panel_rows<T>();                                                        \
  template int64_t packed_weight_bytes<T>(WeightType, int64_t, int64_t);                          \
  template void pack_weight_rows<T>(WeightType, void*, const T*, int64_t, int64_t, int64_t,       \
                                    int64_t, const std::string&);                                 \
  template void linear_packed_forward<T>(T*, const T*, const void*, WeightType, int64_t, int64_t, \
                                         int64_t, bool);                                          \
  template void embedding_packed_forward<T>(T*, const int32_t*, const void*, WeightType, int64_t, \
                                            int64_t, int64_t);
SPS_INSTANTIATE(float)
SPS_INSTANTIATE(double)
#undef SPS_INSTANTIATE

}  // namespace sps::ops
