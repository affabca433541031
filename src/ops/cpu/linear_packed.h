#pragma once
// The packed linear's kernels (linear_packed.cpp) as one table per build variant. A portable
// x86 build compiles linear_packed.cpp five times: for its own target (namespace `baseline`),
// for AVX-512 (namespace `avx512`, CMake's sps_ops_cpu_avx512), for AVX-512 with VNNI
// (`avx512vnni`), for AVX-512 with VNNI and BF16 (`avx512bf16`: Zen 4 and later, Intel since
// Cooper Lake) and for AVX2 with AVX-VNNI (`avx2vnni`: Intel's client CPUs without AVX-512);
// the VNNI builds are the others' kernels with int8 blocks multiplied by vpdpbusd
// (cpu::kUnsignedDot4), the BF16 one multiplies bf16 pairs by vdpbf16ps
// (linear_packed_bf16.h). Each has its own vector width and panel width; the process runs one
// of them: the most capable of each width, the widths chosen between once by timing
// (linear_packed_dispatch.cpp). All give the same bits (every
// output is the same chain of fused multiply-adds over the same exact products; vdpbf16ps
// differs only where it flushes a subnormal to zero), so the choice changes speed only. Only the
// training attention is compiled for AVX-512 too (attention_variants.h), and a variant's
// object defines no symbol outside its namespace (CpuTargets.*VariantKeepsToItsNamespace), so
// no such code can be linked into a function a plain AVX2 CPU runs.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/kernel_variant.h"
#include "ops/weight_type.h"

namespace sps::ops {

// The contracts of ops.h's packed_panel_rows, packed_weight_bytes, pack_weight_rows,
// linear_packed_forward and embedding_packed_forward, in one variant.
template <typename T>
struct PackedLinearKernels {
  const char* variant;  // "baseline", "avx512", "avx512vnni", "avx512bf16" or "avx2vnni"
  int vector_bytes;     // the width of its vectors
  int64_t (*panel_rows)();
  int64_t (*weight_bytes)(WeightType type, int64_t in_dim, int64_t out_dim);
  void (*pack_weight_rows)(WeightType type, void* packed, const T* rows, int64_t first_row,
                           int64_t row_count, int64_t in_dim, int64_t out_dim,
                           const std::string& what);
  void (*forward)(T* out, const T* in, const void* packed, WeightType type, int64_t rows,
                  int64_t in_dim, int64_t out_dim, bool accumulate);
  void (*embedding)(T* out, const int32_t* tokens, const void* packed, WeightType type, int64_t n,
                    int64_t d, int64_t V);
};

namespace baseline {
template <typename T>
const PackedLinearKernels<T>& packed_linear_kernels();
}
namespace avx512 {
template <typename T>
const PackedLinearKernels<T>& packed_linear_kernels();
}
namespace avx512vnni {
template <typename T>
const PackedLinearKernels<T>& packed_linear_kernels();
}
namespace avx512bf16 {
template <typename T>
const PackedLinearKernels<T>& packed_linear_kernels();
}
namespace avx2vnni {
template <typename T>
const PackedLinearKernels<T>& packed_linear_kernels();
}

// Every variant this build has and this CPU can run, the build's own first.
template <typename T>
std::vector<const PackedLinearKernels<T>*> runnable_packed_linear_variants();

// The variant this process runs: of the runnable ones, the last of each vector width, and of
// those the fastest on a small multiply in f32, bf16 and int8 weights, timed once at the first
// call.
template <typename T>
const PackedLinearKernels<T>& packed_linear();

}  // namespace sps::ops
