// The model's training step on the CUDA backend against the CPU backend, on a real GPU:
// loss, every gradient, the clipping norm and two AdamW updates for every family, with
// documents, with and without recomputation. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "model/model_fixtures.h"
#include "train/optimizer.h"

namespace sps {
namespace {

using testing::max_relative_error;

std::vector<float> download(const ops::Backend<float>& backend, const float* data, int64_t n) {
  std::vector<float> host(n);
  backend.download(host.data(), data, size_t(n) * sizeof(float));
  return host;
}

TEST(CudaModel, TrainingStepsMatchTheCpuBackend) {
  SPS_REQUIRE_GPU();
  const ops::Backend<float>& gpu = ops::backend_for({ops::Device::Kind::cuda, 0});
  for (const std::string& family : testing::kFamilies) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(family + (recompute ? ", recomputed" : ""));
      const ModelConfig c = testing::micro_config(family, 3);
      Model<float> on_gpu(c, gpu), on_cpu(c);
      testing::randomize_weights(on_cpu, 5);
      const int64_t B = 2, T = c.block_size, P = on_cpu.params().total();
      gpu.upload(on_gpu.weights(), on_cpu.weights(), size_t(P) * sizeof(float));
      on_gpu.set_recompute(recompute);
      on_cpu.set_recompute(recompute);
      AdamW adam_gpu(on_gpu.params(), OptimizerSettings{}, gpu);
      AdamW adam_cpu(on_cpu.params(), OptimizerSettings{});
      const std::vector<int32_t> x = testing::random_tokens(B, T, c, 7, {4});
      const std::vector<int32_t> y = testing::random_tokens(B, T, c, 8);
      for (int step = 0; step < 2; ++step) {
        on_gpu.zero_grads();
        on_cpu.zero_grads();
        const StepResult a = on_gpu.forward_backward(x.data(), y.data(), B, T, 0.5);
        const StepResult b = on_cpu.forward_backward(x.data(), y.data(), B, T, 0.5);
        EXPECT_NEAR(a.loss, b.loss, 1e-5 * b.loss);
        EXPECT_LT(max_relative_error(download(gpu, on_gpu.grads(), P),
                                     std::vector<float>(on_cpu.grads(), on_cpu.grads() + P)),
                  1e-4);
        const double norm_gpu = global_grad_norm(gpu, on_gpu.grads(), P);
        const double norm_cpu = global_grad_norm(on_cpu.backend(), on_cpu.grads(), P);
        EXPECT_NEAR(norm_gpu, norm_cpu, 1e-5 * norm_cpu);
        adam_gpu.update(gpu, on_gpu.weights(), on_gpu.grads(), 1e-2, 0.9);
        adam_cpu.update(on_cpu.backend(), on_cpu.weights(), on_cpu.grads(), 1e-2, 0.9);
      }
      EXPECT_LT(max_relative_error(download(gpu, on_gpu.weights(), P),
                                   std::vector<float>(on_cpu.weights(), on_cpu.weights() + P)),
                1e-3);  // AdamW divides by √v: a gradient near zero moves its weight by up to lr
    }
  }
}

}  // namespace
}  // namespace sps
