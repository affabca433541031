#pragma once
// The same work on a model on some backend and on one on the CPU backend, in lockstep, for
// the tests of a backend: every result of both crosses to the host and goes to
// compare(what, on_backend, on_cpu), which decides how close they must be.
#include <functional>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "model/model_fixtures.h"
#include "train/optimizer.h"

namespace sps::testing {

using LockstepCompare = std::function<void(const std::string& what, const std::vector<double>&,
                                           const std::vector<double>&)>;

// n elements of a model's backend memory, on the host.
inline std::vector<double> host_copy(const Model<float>& model, const float* data, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  model.backend().download(host.data(), data, size_t(n) * sizeof(float));
  return {host.begin(), host.end()};
}

// Both models with the same random weights (drawn on the CPU, uploaded to the backend).
inline void same_weights(Model<float>& on_backend, Model<float>& on_cpu, uint64_t seed) {
  randomize_weights(on_cpu, seed);
  on_backend.backend().upload(on_backend.weights(), on_cpu.weights(),
                              size_t(on_cpu.params().total()) * sizeof(float));
}

// Two training steps (forward and backward with documents, clipping norm, AdamW), then a
// scoring forward: losses, gradients, norms, weights, per-position NLL and logits.
inline void train_in_lockstep(const ModelConfig& c, const ops::Backend<float>& backend,
                              bool recompute, const LockstepCompare& compare) {
  Model<float> on_backend(c, backend), on_cpu(c);
  same_weights(on_backend, on_cpu, 5);
  on_backend.set_recompute(recompute);
  on_cpu.set_recompute(recompute);
  AdamW adam_backend(on_backend.params(), OptimizerSettings{}, backend);
  AdamW adam_cpu(on_cpu.params(), OptimizerSettings{});
  const int64_t B = 2, T = c.block_size, P = on_cpu.params().total();
  const std::vector<int32_t> x = random_tokens(B, T, c, 7, {4});
  const std::vector<int32_t> y = random_tokens(B, T, c, 8);
  for (int step = 0; step < 2; ++step) {
    const std::string at = " after step " + std::to_string(step + 1);
    on_backend.zero_grads();
    on_cpu.zero_grads();
    const StepResult a = on_backend.forward_backward(x.data(), y.data(), B, T, 0.5);
    const StepResult b = on_cpu.forward_backward(x.data(), y.data(), B, T, 0.5);
    compare("loss" + at, {a.loss}, {b.loss});
    compare("gradients" + at, host_copy(on_backend, on_backend.grads(), P),
            host_copy(on_cpu, on_cpu.grads(), P));
    compare("gradient norm" + at, {global_grad_norm(backend, on_backend.grads(), P)},
            {global_grad_norm(on_cpu.backend(), on_cpu.grads(), P)});
    adam_backend.update(backend, on_backend.weights(), on_backend.grads(), 1e-2, 0.9);
    adam_cpu.update(on_cpu.backend(), on_cpu.weights(), on_cpu.grads(), 1e-2, 0.9);
    compare("weights" + at, host_copy(on_backend, on_backend.weights(), P),
            host_copy(on_cpu, on_cpu.weights(), P));
  }
  std::vector<double> nll_a(B * T), nll_b(B * T), logits_a(B * T * c.vocab_size),
      logits_b(B * T * c.vocab_size);
  on_backend.forward(x.data(), y.data(), B, T, {nll_a.data(), logits_a.data()});
  on_cpu.forward(x.data(), y.data(), B, T, {nll_b.data(), logits_b.data()});
  compare("scoring NLL", nll_a, nll_b);
  compare("scoring logits", logits_a, logits_b);
}

// Cached generation: prefill in row groups (one row left-padded, documents), fork and
// move_row, steps past the ring's capacity and a multi-token extend of some rows; the logits
// after each call.
inline void decode_in_lockstep(const ModelConfig& c, const ops::Backend<float>& backend,
                               const LockstepCompare& compare) {
  Model<float> on_backend(c, backend), on_cpu(c);
  same_weights(on_backend, on_cpu, 11);
  DecoderShape shape;
  shape.batch = 3;
  shape.max_prompt_tokens = 8;
  shape.max_new_tokens = 10;
  shape.max_chunk_tokens = 4;
  shape.prefill_rows = 2;
  Decoder<float> a(on_backend, shape), b(on_cpu, shape);
  std::vector<int32_t> prompts = random_tokens(3, 8, c, 12, {3});
  prompts[0] = prompts[1] = c.pad_token_id;
  const auto logits = [&](const std::string& what, int64_t rows) {
    const int64_t n = rows * c.vocab_size;
    compare(what, {a.logits(), a.logits() + n}, {b.logits(), b.logits() + n});
  };
  a.prefill(prompts.data(), 8);
  b.prefill(prompts.data(), 8);
  logits("prefill", 3);
  a.fork(2, a, 0);  // a fork continues a prefilled prompt
  b.fork(2, b, 0);
  a.move_row(1, 2);
  b.move_row(1, 2);
  logits("fork and move_row", 3);
  for (int32_t token = 5; token < 9; ++token) {
    const std::vector<int32_t> step = {token, token + 1, token + 2};
    a.step(step.data());
    b.step(step.data());
    logits("step feeding " + std::to_string(token), 3);
  }
  const std::vector<int32_t> chunk = {1, 2, 3, 4, 5, 6, 7, 8};
  a.extend(chunk.data(), 4, 2);
  b.extend(chunk.data(), 4, 2);
  logits("extend", 2 * 4);
}

}  // namespace sps::testing
