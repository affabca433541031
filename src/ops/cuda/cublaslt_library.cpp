#include "ops/cuda/cublaslt_library.h"

#include <string>

#include "ops/cuda/toolkit_library.h"

namespace sps::ops::cuda {

const CublasLt& cublaslt() {
  static const CublasLt loaded = [] {
    constexpr const char* what = "cuBLASLt";
    // Kept open for the life of the process.
    void* library =
        open_toolkit_library("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), what);
    CublasLt f{};
    find_symbol(library, f.create, "cublasLtCreate", what);
    find_symbol(library, f.status_string, "cublasLtGetStatusString", what);
    find_symbol(library, f.layout_create, "cublasLtMatrixLayoutCreate", what);
    find_symbol(library, f.layout_destroy, "cublasLtMatrixLayoutDestroy", what);
    find_symbol(library, f.matmul_desc_create, "cublasLtMatmulDescCreate", what);
    find_symbol(library, f.matmul_desc_destroy, "cublasLtMatmulDescDestroy", what);
    find_symbol(library, f.matmul_desc_set_attribute, "cublasLtMatmulDescSetAttribute", what);
    find_symbol(library, f.matmul, "cublasLtMatmul", what);
    find_symbol(library, f.preference_create, "cublasLtMatmulPreferenceCreate", what);
    find_symbol(library, f.preference_destroy, "cublasLtMatmulPreferenceDestroy", what);
    find_symbol(library, f.preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute", what);
    find_symbol(library, f.algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic", what);
    return f;
  }();
  return loaded;
}

}  // namespace sps::ops::cuda
