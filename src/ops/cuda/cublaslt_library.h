#pragma once
// cuBLASLt, loaded when the first GEMM runs rather than when sps starts: the library is half
// a gigabyte, and mapping and relocating it at every start cost each CPU command 0.17 s and
// 210 MB of resident memory. The functions sps calls are looked up once, with the
// signatures of the toolkit's header.
#include <cublasLt.h>

namespace sps::ops::cuda {

struct CublasLt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtGetStatusString) status_string;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
};

// The library, loaded on first use (LD_LIBRARY_PATH, the system's paths, then the toolkit's
// library folder this sps was built with); a UserError saying where it looked when it
// cannot be loaded.
const CublasLt& cublaslt();

}  // namespace sps::ops::cuda
