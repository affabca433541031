// cuBLASLt runs the column-major GEMMs of ops/linear_gemms.h, which the host tests check
// against the CPU backend.
#include "ops/cuda/linear.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "ops/cuda/bf16.h"
#include "ops/cuda/check.h"
#include "ops/cuda/cublaslt_library.h"
#include "ops/cuda/memory.h"
#include "ops/linear_gemms.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps::ops::cuda {

namespace {

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cuBLASLt {}: {}", what, cublaslt().status_string(status));
}

// One handle and workspace per process (one process drives one GPU).
struct Blas {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t(32) << 20;
};

Blas& blas() {
  static Blas b = [] {
    Blas made;
    check_blas(cublaslt().create(&made.handle), "create");
    made.workspace = device_allocate(made.workspace_bytes);
    return made;
  }();
  return b;
}

// RAII for cuBLASLt's descriptors.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType type, int64_t rows, int64_t cols, int64_t ld) {
    check_blas(cublaslt().layout_create(&layout, type, uint64_t(rows), uint64_t(cols), ld),
               "matrix layout");
  }
  ~Layout() { cublaslt().layout_destroy(layout); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  MatmulDesc() {
    check_blas(cublaslt().matmul_desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "matmul descriptor");
  }
  ~MatmulDesc() { cublaslt().matmul_desc_destroy(desc); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
};
struct Preference {
  cublasLtMatmulPreference_t preference = nullptr;
  Preference() { check_blas(cublaslt().preference_create(&preference), "matmul preference"); }
  ~Preference() { cublaslt().preference_destroy(preference); }
  template <typename Value>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, Value value) {
    check_blas(cublaslt().preference_set_attribute(preference, attribute, &value, sizeof value),
               "matmul preference attribute");
  }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
};

// A GEMM input: fp32, or a dense bf16 copy.
struct Operand {
  const void* data;
  cudaDataType type;
};

// Dense bf16 copies of fp32 operands, one device buffer per operand kind, grown on demand
// and kept (one process drives one GPU; the stream orders every use of a buffer).
Operand bf16_copy(GemmOperand kind, const float* from, int64_t rows, int64_t cols, int64_t ld) {
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  static std::map<GemmOperand, Buffer> buffers;
  Buffer& b = buffers[kind];
  const size_t bytes = size_t(rows * cols) * 2;
  if (b.bytes < bytes) {
    device_free(b.data);
    b.data = device_allocate(bytes);
    b.bytes = bytes;
  }
  round_to_bf16(b.data, from, rows, cols, dense_stride(ld, cols));
  return {b.data, CUDA_R_16BF};
}

// The largest power of two up to 256 that divides a device address: what cuBLASLt's
// heuristic is told of each matrix's alignment (it assumes 256 otherwise).
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// One GEMM shape's descriptors and the algorithm cuBLASLt's heuristic picks for it, made on
// first use and kept for the process: the heuristic runs once per shape, types and
// alignments instead of inside every call (a decode step makes dozens of small GEMMs), and
// a shape always runs the same algorithm, so repeated steps give the same bits.
struct GemmPlan {
  Layout a, b, cd;
  MatmulDesc op;
  cublasLtMatmulAlgo_t algo{};
  GemmPlan(const ColumnMajorGemm& g, cudaDataType a_type, cudaDataType b_type)
      : a(a_type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda),
        b(b_type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb),
        cd(CUDA_R_32F, g.m, g.n, g.ldc) {}
};

const GemmPlan& plan_for(const ColumnMajorGemm& g, const Operand& a_in, const Operand& b_in,
                         const float* c) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, int, int,
                         uint32_t, uint32_t, uint32_t>;
  // Never destroyed: cuBLASLt, opened at run time, may be gone when static destructors run.
  static auto& plans = *new std::map<Key, std::unique_ptr<GemmPlan>>;
  const uint32_t align_a = alignment_of(a_in.data), align_b = alignment_of(b_in.data),
                 align_c = alignment_of(c);
  std::unique_ptr<GemmPlan>& known =
      plans[Key{g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.trans_a, g.trans_b, int(a_in.type),
                int(b_in.type), align_a, align_b, align_c}];
  if (known) return *known;
  auto plan = std::make_unique<GemmPlan>(g, a_in.type, b_in.type);
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_blas(cublaslt().matmul_desc_set_attribute(plan->op.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                  sizeof ta),
             "transpose of A");
  check_blas(cublaslt().matmul_desc_set_attribute(plan->op.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                  sizeof tb),
             "transpose of B");
  Preference preference;
  preference.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(blas().workspace_bytes));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  check_blas(cublaslt().algo_get_heuristic(blas().handle, plan->op.desc, plan->a.layout,
                                           plan->b.layout, plan->cd.layout, plan->cd.layout,
                                           preference.preference, 1, &best, &found),
             "algorithm heuristic");
  if (found == 0) fail("cuBLASLt: no algorithm for a {} × {} × {} GEMM", g.m, g.n, g.k);
  plan->algo = best.algo;
  known = std::move(plan);
  return *known;
}

void run(const ColumnMajorGemm& g, const std::map<GemmOperand, Operand>& inputs, float* c) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {  // an empty product: C is zero, or unchanged when accumulating
    if (!g.accumulate)
      check(cudaMemset2D(c, size_t(g.ldc) * 4, 0, size_t(g.m) * 4, size_t(g.n)), "zero a matrix");
    return;
  }
  const Operand& a_in = inputs.at(g.a);
  const Operand& b_in = inputs.at(g.b);
  const GemmPlan& plan = plan_for(g, a_in, b_in, c);
  const float alpha = 1, beta = g.accumulate ? 1 : 0;
  Blas& context = blas();
  check_blas(
      cublaslt().matmul(context.handle, plan.op.desc, &alpha, a_in.data, plan.a.layout, b_in.data,
                        plan.b.layout, &beta, c, plan.cd.layout, c, plan.cd.layout, &plan.algo,
                        context.workspace, context.workspace_bytes, nullptr),
      "matmul");
}

}  // namespace

void linear_forward(float* out, const float* in, const float* weight, int64_t rows,
                    int64_t in_dim, int64_t out_dim, bool accumulate, int64_t ld_in,
                    int64_t ld_out, Precision operands) {
  if (operands == Precision::fp32) {
    run(linear_forward_gemm(rows, in_dim, out_dim, accumulate, ld_in, ld_out),
        {{GemmOperand::input, {in, CUDA_R_32F}}, {GemmOperand::weight, {weight, CUDA_R_32F}}},
        out);
    return;
  }
  // The bf16 copies are dense: the GEMM reads them with ld = their columns.
  run(linear_forward_gemm(rows, in_dim, out_dim, accumulate, 0, ld_out),
      {{GemmOperand::input, bf16_copy(GemmOperand::input, in, rows, in_dim, ld_in)},
       {GemmOperand::weight, bf16_copy(GemmOperand::weight, weight, out_dim, in_dim, 0)}},
      out);
}

std::vector<double> time_gemm(float* out, const float* a, const float* b, int64_t n, int repeats,
                              Precision operands) {
  const ColumnMajorGemm gemm = linear_forward_gemm(n, n, n, false, 0, 0);
  std::map<GemmOperand, Operand> inputs = {{GemmOperand::input, {a, CUDA_R_32F}},
                                           {GemmOperand::weight, {b, CUDA_R_32F}}};
  if (operands == Precision::bf16) {
    inputs[GemmOperand::input] = bf16_copy(GemmOperand::input, a, n, n, 0);
    inputs[GemmOperand::weight] = bf16_copy(GemmOperand::weight, b, n, n, 0);
  }
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    check(cudaDeviceSynchronize(), "wait for the GPU");
    const double start = now_seconds();
    run(gemm, inputs, out);
    check(cudaDeviceSynchronize(), "wait for the GEMM");
    seconds.push_back(now_seconds() - start);
  }
  return seconds;
}

void linear_backward(float* din, float* dweight, const float* dout, const float* in,
                     const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                     bool accumulate_din, int64_t ld_in, int64_t ld_dout, Precision operands) {
  if (operands == Precision::fp32) {
    const std::map<GemmOperand, Operand> inputs = {
        {GemmOperand::input, {in, CUDA_R_32F}},
        {GemmOperand::weight, {weight, CUDA_R_32F}},
        {GemmOperand::output_gradient, {dout, CUDA_R_32F}}};
    if (din)
      run(linear_input_gradient_gemm(rows, in_dim, out_dim, accumulate_din, ld_in, ld_dout),
          inputs, din);
    if (dweight)
      run(linear_weight_gradient_gemm(rows, in_dim, out_dim, ld_in, ld_dout), inputs, dweight);
    return;
  }
  // bf16 copies of what each GEMM reads (dense); din keeps in's stride (ld_in), dweight is
  // dense fp32.
  const Operand dout16 = bf16_copy(GemmOperand::output_gradient, dout, rows, out_dim, ld_dout);
  if (din)
    run(linear_input_gradient_gemm(rows, in_dim, out_dim, accumulate_din, ld_in, 0),
        {{GemmOperand::weight, bf16_copy(GemmOperand::weight, weight, out_dim, in_dim, 0)},
         {GemmOperand::output_gradient, dout16}},
        din);
  if (dweight)
    run(linear_weight_gradient_gemm(rows, in_dim, out_dim, 0, 0),
        {{GemmOperand::input, bf16_copy(GemmOperand::input, in, rows, in_dim, ld_in)},
         {GemmOperand::output_gradient, dout16}},
        dweight);
}

}  // namespace sps::ops::cuda
