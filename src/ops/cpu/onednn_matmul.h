#pragma once
// GEMMs through oneDNN's matmul primitive (Debian's oneDNN 2.6, its 2.x API), for the CPU's
// bf16 linear (linear_bf16.h) and the benchmarks: one primitive per GEMM shape, created on
// first use and kept for the process, a B operand read by many GEMMs (a weight) reordered
// once into the layout oneDNN prefers for it, and the scratchpad ours, grown and kept. f32
// runs on every CPU, so the tests check this glue against sgemm everywhere; bf16 needs a CPU
// where oneDNN has a bf16 matmul (AVX512-BF16 or AMX for oneDNN 2.6; not AVX2).
#include <cstddef>
#include <cstdint>
#include <string>

namespace sps::ops::cpu::onednn {

enum class DataType { f32, bf16 };  // bf16 operands are arrays of their 16 bits (util/float_formats.h)

// C[M, N] (+)= op(A)[M, K] · op(B)[K, N], row-major, fp32 sums into fp32 C with row stride
// ldc. A holds [M, K] with row stride lda, or [K, M] when trans_a; B holds [K, N] with row
// stride ldb, or [N, K] when trans_b; both of `type`. With prepared_b, B is in the prepared
// layout of (type, K, N) made by prepare_b, and trans_b and ldb are not used.
struct Gemm {
  DataType type = DataType::f32;
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;
  bool prepared_b = false;
  auto operator<=>(const Gemm&) const = default;
};

// Whether oneDNN has an implementation of this GEMM on this CPU (made and kept on the first
// ask; M, N, K > 0).
bool available(const Gemm& gemm);
// Runs it; only for a GEMM that is available().
void run(const Gemm& gemm, const void* A, const void* B, float* C);
// The implementation oneDNN chose for it (pd.impl_info_str(), e.g. "brg:avx512_core_amx_bf16"),
// or "none" where it has none.
std::string implementation(const Gemm& gemm);

// The layout oneDNN's matmul prefers for a [K, N] B of `type` (the same for every M): the bytes
// it takes, and B (stored as Gemm says: [K, N] with row stride ldb, or [N, K] when trans_b)
// copied into `out` in it. False, with nothing written, where oneDNN has no such matmul.
bool can_prepare(DataType type, int64_t K, int64_t N);
size_t prepared_bytes(DataType type, int64_t K, int64_t N);
void prepare_b(DataType type, bool trans_b, int64_t K, int64_t N, int64_t ldb, const void* B,
               void* out);

// "oneDNN 2.6.3", and the instruction set its kernels use on this CPU ("avx2",
// "avx512_core_amx", …; capped by DNNL_MAX_CPU_ISA).
std::string version();
std::string cpu_isa();

}  // namespace sps::ops::cpu::onednn
