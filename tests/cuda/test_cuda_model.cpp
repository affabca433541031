// The model on the CUDA backend against the CPU backend, on a real GPU: the training step
// (loss, every gradient, the clipping norm and two AdamW updates) with and without
// recomputation, and cached generation (prefill, steps, extends, fork, move_row), for every
// family, with documents. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "model/decoder.h"
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

// Prefill in row groups, steps past the ring's capacity, a multi-token extend of some rows,
// fork and move_row: the GPU decoder's logits follow the CPU's, with ω off and on.
TEST(CudaModel, CachedGenerationMatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  const ops::Backend<float>& gpu = ops::backend_for({ops::Device::Kind::cuda, 0});
  for (const std::string& family : testing::kFamilies) {
    for (const int64_t omega : {-1, 3}) {
      SCOPED_TRACE(family + ", omega " + std::to_string(omega));
      const ModelConfig c = testing::micro_config(family, 2, omega);
      Model<float> on_gpu(c, gpu), on_cpu(c);
      testing::randomize_weights(on_cpu, 11);
      gpu.upload(on_gpu.weights(), on_cpu.weights(),
                 size_t(on_cpu.params().total()) * sizeof(float));
      DecoderShape shape;
      shape.batch = 3;
      shape.max_prompt_tokens = 8;
      shape.max_new_tokens = 10;
      shape.max_chunk_tokens = 4;
      shape.prefill_rows = 2;
      Decoder<float> a(on_gpu, shape), b(on_cpu, shape);
      std::vector<int32_t> prompts = testing::random_tokens(3, 8, c, 12, {3});
      prompts[0] = prompts[1] = c.pad_token_id;  // row 0 left-padded
      const int64_t V = c.vocab_size;
      const auto close_logits = [&](int64_t rows) {
        EXPECT_LT(max_relative_error(std::vector<float>(a.logits(), a.logits() + rows * V),
                                     std::vector<float>(b.logits(), b.logits() + rows * V)),
                  1e-4);
      };
      a.prefill(prompts.data(), 8);
      b.prefill(prompts.data(), 8);
      close_logits(3);
      for (int32_t token = 5; token < 9; ++token) {
        const std::vector<int32_t> step = {token, token + 1, token + 2};
        a.step(step.data());
        b.step(step.data());
        close_logits(3);
      }
      a.fork(2, a, 0);
      b.fork(2, b, 0);
      a.move_row(1, 2);
      b.move_row(1, 2);
      const std::vector<int32_t> chunk = {1, 2, 3, 4, 5, 6, 7, 8};
      a.extend(chunk.data(), 4, 2);
      b.extend(chunk.data(), 4, 2);
      close_logits(2 * 4);
      EXPECT_EQ(a.last_step_attention_pairs() > 0, b.last_step_attention_pairs() > 0);
    }
  }
}

}  // namespace
}  // namespace sps
