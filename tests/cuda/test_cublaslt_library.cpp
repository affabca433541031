// cuBLASLt is opened on first use, not at start: it loads (no GPU needed) and resolves every
// function the GEMMs call.
#include <gtest/gtest.h>

#include <string>

#include "ops/cuda/cublaslt_library.h"

namespace sps {
namespace {

TEST(CublasLtLibrary, LoadsOnFirstUseWithEveryFunction) {
  const ops::cuda::CublasLt& library = ops::cuda::cublaslt();
  EXPECT_NE(library.create, nullptr);
  EXPECT_NE(library.matmul, nullptr);
  EXPECT_NE(library.algo_get_heuristic, nullptr);
  EXPECT_FALSE(std::string(library.status_string(CUBLAS_STATUS_NOT_INITIALIZED)).empty());
  EXPECT_EQ(&ops::cuda::cublaslt(), &library);  // loaded once
}

}  // namespace
}  // namespace sps
