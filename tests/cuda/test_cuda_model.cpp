// The model on the CUDA backend against the CPU backend, on a real GPU: the training step
// (loss, every gradient, the clipping norm and two AdamW updates) with and without
// recomputation, and cached generation (prefill, steps, extends, fork, move_row), for every
// family, with documents; cached decoding against the GPU's own training forward; and two
// identical steps giving the same bits. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "model/backend_lockstep.h"
#include "model/decode_against_forward.h"

namespace sps {
namespace {

// fp32 on both sides, different summation orders: close, not equal. AdamW divides by √v,
// so a gradient near zero may move its weight by up to the learning rate.
void close(const std::string& what, const std::vector<double>& gpu,
           const std::vector<double>& cpu) {
  const double tolerance = what.rfind("weights", 0) == 0 ? 1e-3 : 1e-4;
  EXPECT_LT(testing::max_relative_error(gpu, cpu), tolerance) << what;
}

const ops::Backend<float>& gpu() { return ops::backend_for({"cuda", 0}); }

TEST(CudaModel, TrainingStepsMatchTheCpuBackend) {
  SPS_REQUIRE_GPU();
  for (const std::string& family : testing::model_families())
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(family + (recompute ? ", recomputed" : ""));
      testing::train_in_lockstep(testing::micro_config(family, 3), gpu(), recompute, close);
    }
}

TEST(CudaModel, CachedGenerationMatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  for (const std::string& family : testing::model_families())
    for (const int64_t omega : {-1, 3}) {
      SCOPED_TRACE(family + ", omega " + std::to_string(omega));
      testing::decode_in_lockstep(testing::micro_config(family, 2, omega), gpu(), close);
    }
}

// Cached decoding on the GPU gives the logits of the GPU's own training forward: a
// left-padded batch with documents, one token per step and in extends of four.
TEST(CudaModel, CachedDecodeEqualsTheFullForwardOnTheGpu) {
  SPS_REQUIRE_GPU();
  for (const std::string& family : testing::model_families()) {
    SCOPED_TRACE(family);
    const ModelConfig c = testing::micro_config(family, 2);
    Model<float> model(c, gpu());
    model.init_weights(6);
    const auto a = testing::random_tokens(1, 12, c, 31, {4, 9});
    const auto b = testing::random_tokens(1, 10, c, 32, {1});
    const auto d = testing::random_tokens(1, 11, c, 33, {6});
    testing::check_against_forward(model, {a, b, d}, {6, 2, 8});
    testing::check_against_forward(model, {a, b, d}, {6, 2, 8}, 0, 4);
  }
}

// The same step twice from the same state gives the same loss and gradients, bit for bit
// (fixed-order kernels, one cuBLASLt algorithm per GEMM shape).
TEST(CudaModel, TwoIdenticalStepsAreBitIdentical) {
  SPS_REQUIRE_GPU();
  for (const std::string& family : testing::model_families()) {
    SCOPED_TRACE(family);
    const ModelConfig c = testing::micro_config(family, 3);
    Model<float> model(c, gpu());
    model.init_weights(7);
    const auto x = testing::random_tokens(2, 12, c, 8, {5});
    const auto y = testing::random_tokens(2, 12, c, 9, {});
    std::vector<float> first(size_t(model.params().total())), second(first.size());
    model.zero_grads();
    const StepResult r1 = model.forward_backward(x.data(), y.data(), 2, 12);
    gpu().download(first.data(), model.grads(), first.size() * sizeof(float));
    model.zero_grads();
    const StepResult r2 = model.forward_backward(x.data(), y.data(), 2, 12);
    gpu().download(second.data(), model.grads(), second.size() * sizeof(float));
    EXPECT_EQ(r1.loss, r2.loss);
    EXPECT_TRUE(first == second);
    EXPECT_NE(first, std::vector<float>(first.size(), 0.0f));
  }
}

}  // namespace
}  // namespace sps
