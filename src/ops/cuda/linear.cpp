// cuBLASLt runs the column-major GEMMs of ops/linear_gemms.h, which the host tests check
// against the CPU backend.
#include "ops/cuda/linear.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <type_traits>

#include "ops/cuda/bf16.h"
#include "ops/cuda/check.h"
#include "ops/cuda/cublaslt_library.h"
#include "ops/cuda/memory.h"
#include "ops/linear_gemms.h"
#include "util/error.h"

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

void run(const ColumnMajorGemm& g, const std::map<GemmOperand, Operand>& inputs, float* c) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {  // an empty product: C is zero, or unchanged when accumulating
    if (!g.accumulate)
      check(cudaMemset2D(c, size_t(g.ldc) * 4, 0, size_t(g.m) * 4, size_t(g.n)), "zero a matrix");
    return;
  }
  const Operand& a_in = inputs.at(g.a);
  const Operand& b_in = inputs.at(g.b);
  const Layout a(a_in.type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  const Layout b(b_in.type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  const Layout cd(CUDA_R_32F, g.m, g.n, g.ldc);
  // Created after the layouts and destroyed whatever happens next.
  cublasLtMatmulDesc_t op = nullptr;
  check_blas(cublaslt().matmul_desc_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                        decltype(&cublasLtMatmulDescDestroy)>
      op_owner(op, cublaslt().matmul_desc_destroy);
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublaslt().matmul_desc_set_attribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublaslt().matmul_desc_set_attribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  const float alpha = 1, beta = g.accumulate ? 1 : 0;
  Blas& context = blas();
  // No algorithm given: cuBLASLt picks one by its own heuristic for this shape.
  const cublasStatus_t status = cublaslt().matmul(
      context.handle, op, &alpha, a_in.data, a.layout, b_in.data, b.layout, &beta, c,
      cd.layout, c, cd.layout, nullptr, context.workspace, context.workspace_bytes, nullptr);
  check_blas(status, "matmul");
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
