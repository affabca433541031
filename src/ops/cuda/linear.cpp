// cuBLASLt runs the column-major GEMMs of ops/linear_gemms.h, which the host tests check
// against the CPU backend.
#include "ops/cuda/linear.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <type_traits>

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
  Layout(int64_t rows, int64_t cols, int64_t ld) {
    check_blas(cublaslt().layout_create(&layout, CUDA_R_32F, uint64_t(rows), uint64_t(cols), ld),
               "matrix layout");
  }
  ~Layout() { cublaslt().layout_destroy(layout); }
};

void run(const ColumnMajorGemm& g, const std::map<GemmOperand, const float*>& inputs,
         float* c) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {  // an empty product: C is zero, or unchanged when accumulating
    if (!g.accumulate)
      check(cudaMemset2D(c, size_t(g.ldc) * 4, 0, size_t(g.m) * 4, size_t(g.n)), "zero a matrix");
    return;
  }
  const Layout a(g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  const Layout b(g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  const Layout cd(g.m, g.n, g.ldc);
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
      context.handle, op, &alpha, inputs.at(g.a), a.layout, inputs.at(g.b), b.layout, &beta, c,
      cd.layout, c, cd.layout, nullptr, context.workspace, context.workspace_bytes, nullptr);
  check_blas(status, "matmul");
}

}  // namespace

void linear_forward(float* out, const float* in, const float* weight, int64_t rows,
                    int64_t in_dim, int64_t out_dim, bool accumulate, int64_t ld_in,
                    int64_t ld_out) {
  run(linear_forward_gemm(rows, in_dim, out_dim, accumulate, ld_in, ld_out),
      {{GemmOperand::input, in}, {GemmOperand::weight, weight}}, out);
}

void linear_backward(float* din, float* dweight, const float* dout, const float* in,
                     const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                     bool accumulate_din, int64_t ld_in, int64_t ld_dout) {
  const std::map<GemmOperand, const float*> inputs = {{GemmOperand::input, in},
                                                      {GemmOperand::weight, weight},
                                                      {GemmOperand::output_gradient, dout}};
  if (din)
    run(linear_input_gradient_gemm(rows, in_dim, out_dim, accumulate_din, ld_in, ld_dout), inputs,
        din);
  if (dweight)
    run(linear_weight_gradient_gemm(rows, in_dim, out_dim, ld_in, ld_dout), inputs, dweight);
}

}  // namespace sps::ops::cuda
