// ops.h's packed linear over the variant this process runs (linear_packed.h): the build's own
// kernels, or their AVX-512, VNNI and BF16 builds where the CPU has those and one measured
// faster, or the one SPS_PACKED_LINEAR names.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ops/cpu/linear_packed.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps::ops {
namespace {

#if SPS_KERNEL_VARIANTS
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
bool cpu_has_avx512_vnni() { return cpu_has_avx512() && __builtin_cpu_supports("avx512vnni"); }
bool cpu_has_avx512_bf16() { return cpu_has_avx512_vnni() && __builtin_cpu_supports("avx512bf16"); }
bool cpu_has_avx_vnni() {  // (with the AVX2 this binary needs anyway)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avxvnni");
}
#endif

// One multiply of 16 rows by a 512 × 512 weight of a given type, packed by the variant
// itself (its panels differ from the others').
template <typename T>
struct TimingMultiply {
  static constexpr int64_t n = 512, rows = 16;
  const PackedLinearKernels<T>& k;
  WeightType type;
  std::vector<T> in, out;
  std::vector<uint8_t> packed;
  TimingMultiply(const PackedLinearKernels<T>& kernels, WeightType weight_type)
      : k(kernels), type(weight_type), in(rows * n), out(rows * n),
        packed(size_t(k.weight_bytes(type, n, n))) {
    std::vector<T> weight(n * n);
    for (int64_t i = 0; i < n * n; ++i) weight[i] = T(i % 7 - 3) / T(64);
    for (int64_t i = 0; i < rows * n; ++i) in[i] = T(i % 5 - 2) / T(8);
    k.pack_weight_rows(type, packed.data(), weight.data(), 0, n, n, n, "a timing weight");
    seconds();  // warms the caches
  }
  double seconds() {
    const double start = now_seconds();
    k.forward(out.data(), in.data(), packed.data(), type, rows, n, n, false);
    return now_seconds() - start;
  }
};

// The variant that multiplies fastest in f32, bf16 and int8 weights together: each variant's
// shortest time over rounds that take the variants in turn, so that a burst of other work slows
// them alike, and on this thread alone (a region of one thread runs the kernels' own parallel
// loops inline, so no late wake-up of another thread is timed).
template <typename T>
const PackedLinearKernels<T>* fastest(const std::vector<const PackedLinearKernels<T>*>& variants) {
  std::vector<WeightType> types{WeightType::f32};
  if constexpr (std::is_same_v<T, float>) {  // (double's are the same scalar chains in each)
    types.push_back(WeightType::bf16);
    types.push_back(WeightType::int8);
  }
  std::vector<TimingMultiply<T>> multiplies;
  for (const PackedLinearKernels<T>* k : variants)
    for (const WeightType type : types) multiplies.emplace_back(*k, type);
  std::vector<double> shortest(multiplies.size(), 1e30);
#pragma omp parallel num_threads(1)
  for (int round = 0; round < 16; ++round)
    for (size_t i = 0; i < multiplies.size(); ++i)
      shortest[i] = std::min(shortest[i], multiplies[i].seconds());
  std::vector<double> seconds(variants.size(), 0.0);
  for (size_t i = 0; i < multiplies.size(); ++i) seconds[i / types.size()] += shortest[i];
  return variants[std::min_element(seconds.begin(), seconds.end()) - seconds.begin()];
}

}  // namespace

template <typename T>
std::vector<const PackedLinearKernels<T>*> runnable_packed_linear_variants() {
  std::vector<const PackedLinearKernels<T>*> variants{&baseline::packed_linear_kernels<T>()};
#if SPS_KERNEL_VARIANTS
  if (cpu_has_avx512()) variants.push_back(&avx512::packed_linear_kernels<T>());
  if (cpu_has_avx512_vnni()) variants.push_back(&avx512vnni::packed_linear_kernels<T>());
  if (cpu_has_avx512_bf16()) variants.push_back(&avx512bf16::packed_linear_kernels<T>());
  if (cpu_has_avx_vnni()) variants.push_back(&avx2vnni::packed_linear_kernels<T>());
#endif
  return variants;
}

// The variant named by SPS_PACKED_LINEAR, where it is set: to time or test one build against
// another on one machine (all give the same numbers). Null when unset.
template <typename T>
const PackedLinearKernels<T>* pinned(const std::vector<const PackedLinearKernels<T>*>& variants) {
  const char* name = std::getenv("SPS_PACKED_LINEAR");
  if (!name || !*name) return nullptr;
  std::string names;
  for (const PackedLinearKernels<T>* k : variants) {
    if (k->variant == std::string_view(name)) return k;
    names += (names.empty() ? "" : ", ") + std::string(k->variant);
  }
  throw UserError("SPS_PACKED_LINEAR: expected a build of the packed linear that this binary has "
                  "and this CPU runs (" + names + "), got '" + name + "'");
}

// The candidates of the timing: of the runnable variants of one vector width, the last, which
// extends the others of its width by instructions that do their work in fewer steps (VNNI's
// vpdpbusd for int8 blocks, BF16's vdpbf16ps for bf16 pairs; linear_packed.h). Those builds
// are not timed against each other: their f32 kernels are the same code, whose start-up times
// differed by up to 25% from start to start on a Zen 5 VM, more than the 10-25% the
// instructions gain in the timing multiply, so some starts there ran the AVX-512 build without
// VNNI (its int8 projections of 8 and 12 rows 1.6 times slower; docs/performance.md).
// Widths are timed against each other: whether AVX-512 pays depends on the CPU.
template <typename T>
std::vector<const PackedLinearKernels<T>*> most_capable_of_each_width(
    const std::vector<const PackedLinearKernels<T>*>& variants) {
  std::vector<const PackedLinearKernels<T>*> candidates;
  for (const PackedLinearKernels<T>* k : variants) {
    const auto same_width = std::find_if(candidates.begin(), candidates.end(), [&](const auto* c) {
      return c->vector_bytes == k->vector_bytes;
    });
    if (same_width == candidates.end())
      candidates.push_back(k);
    else
      *same_width = k;
  }
  return candidates;
}

template <typename T>
const PackedLinearKernels<T>& packed_linear() {
  static const PackedLinearKernels<T>* const chosen = [] {
    const std::vector<const PackedLinearKernels<T>*> variants =
        runnable_packed_linear_variants<T>();
    if (const PackedLinearKernels<T>* k = pinned(variants)) return k;
    const std::vector<const PackedLinearKernels<T>*> candidates = most_capable_of_each_width(variants);
    return candidates.size() > 1 ? fastest(candidates) : candidates.front();
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
