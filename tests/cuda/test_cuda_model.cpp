// The model on the CUDA backend against the CPU backend, on a real GPU: the training step
// (loss, every gradient, the clipping norm and two AdamW updates) with and without
// recomputation, and cached generation (prefill, steps, extends, fork, move_row), for every
// family, with documents. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "model/backend_lockstep.h"

namespace sps {
namespace {

// fp32 on both sides, different summation orders: close, not equal. AdamW divides by √v,
// so a gradient near zero may move its weight by up to the learning rate.
void close(const std::string& what, const std::vector<double>& gpu,
           const std::vector<double>& cpu) {
  const double tolerance = what.rfind("weights", 0) == 0 ? 1e-3 : 1e-4;
  EXPECT_LT(testing::max_relative_error(gpu, cpu), tolerance) << what;
}

const ops::Backend<float>& gpu() { return ops::backend_for({ops::Device::Kind::cuda, 0}); }

TEST(CudaModel, TrainingStepsMatchTheCpuBackend) {
  SPS_REQUIRE_GPU();
  for (const std::string& family : testing::kFamilies)
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(family + (recompute ? ", recomputed" : ""));
      testing::train_in_lockstep(testing::micro_config(family, 3), gpu(), recompute, close);
    }
}

TEST(CudaModel, CachedGenerationMatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  for (const std::string& family : testing::kFamilies)
    for (const int64_t omega : {-1, 3}) {
      SCOPED_TRACE(family + ", omega " + std::to_string(omega));
      testing::decode_in_lockstep(testing::micro_config(family, 2, omega), gpu(), close);
    }
}

}  // namespace
}  // namespace sps
