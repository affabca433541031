#pragma once
// Small models with large random weights (so a mask or routing error moves the loss) and
// token batches with documents, for the model tests.
#include <string>
#include <vector>

#include "model/config.h"
#include "model/family.h"
#include "model/model.h"
#include "util/rng.h"

namespace sps::testing {

// The golden shape: L=2, H=2, d=16, F=24, V=64, T=12, EOS 60, PREDICT 61, PAD 63.
inline ModelConfig micro_config(const std::string& family, int64_t window,
                                int64_t persistent_key_window = -1) {
  ModelConfig c;
  c.family = family;
  c.n_layer = 2;
  c.n_head = 2;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.vocab_size = 64;
  c.block_size = 12;
  c.window_size = window;
  c.persistent_key_window = persistent_key_window;
  c.eos_token_id = 60;
  c.predict_token_id = 61;
  c.pad_token_id = 63;
  c.init_std = 0.3;
  return c;
}

// Random weights with norm gains 1 + N(0, 0.2) (init gives exactly 1, which hides errors).
template <typename T>
void randomize_weights(Model<T>& model, uint64_t seed) {
  model.init_weights(seed);
  Rng rng(seed + 99);
  for (const auto& e : model.params().entries())
    if (!e.decayed)
      for (int64_t k = 0; k < e.numel; ++k) model.weights()[e.offset + k] = T(1 + 0.2 * rng.normal());
}

// Tokens below EOS, with EOS placed at the given positions of every row.
inline std::vector<int32_t> random_tokens(int64_t B, int64_t T, const ModelConfig& c,
                                          uint64_t seed, const std::vector<int64_t>& eos_at = {}) {
  Rng rng(seed);
  std::vector<int32_t> x(B * T);
  for (auto& t : x) t = int32_t(rng.below(uint64_t(c.eos_token_id)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i : eos_at) x[b * T + i] = c.eos_token_id;
  return x;
}

// Every model family of the registry (model/family.h), in its order: a new row is tested here too.
inline const std::vector<std::string>& model_families() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const StudyFamily& e : study_families())
      if (e.is_model_family()) n.push_back(e.name);
    return n;
  }();
  return names;
}

}  // namespace sps::testing
