#include "ops/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <string>

#include "util/error.h"

namespace sps::ops::cuda {

namespace {

void* open_library() {
  const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  if (void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = ::dlerror();
  const std::string beside_toolkit = std::string(SPS_CUDA_LIBRARY_DIR) + "/" + name;
  if (void* handle = ::dlopen(beside_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  fail("cannot load cuBLASLt ({}; nor {}): put the CUDA toolkit's library folder on "
       "LD_LIBRARY_PATH",
       first_error, beside_toolkit);
}

template <typename Function>
void find(void* library, Function& function, const char* symbol) {
  function = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (!function) fail("cuBLASLt: the library has no {} (an older toolkit than sps was built with?)", symbol);
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt loaded = [] {
    void* library = open_library();  // kept open for the life of the process
    CublasLt f{};
    find(library, f.create, "cublasLtCreate");
    find(library, f.status_string, "cublasLtGetStatusString");
    find(library, f.layout_create, "cublasLtMatrixLayoutCreate");
    find(library, f.layout_destroy, "cublasLtMatrixLayoutDestroy");
    find(library, f.matmul_desc_create, "cublasLtMatmulDescCreate");
    find(library, f.matmul_desc_destroy, "cublasLtMatmulDescDestroy");
    find(library, f.matmul_desc_set_attribute, "cublasLtMatmulDescSetAttribute");
    find(library, f.matmul, "cublasLtMatmul");
    find(library, f.preference_create, "cublasLtMatmulPreferenceCreate");
    find(library, f.preference_destroy, "cublasLtMatmulPreferenceDestroy");
    find(library, f.preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute");
    find(library, f.algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    return f;
  }();
  return loaded;
}

}  // namespace sps::ops::cuda
