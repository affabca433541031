#pragma once
// A deliberately plain, double-precision reference of the whole SPS model, written
// straight from docs/model.md (§2–§5, §8) for the tests only. It shares nothing with src/ops or
// src/model except the plain ModelConfig struct: slots are laid out in flat interleaved
// order (x_0, ρ_0, x_1, ρ_1, …), visibility is a dense boolean matrix built from the
// literal rules of docs/model.md §4, and every operation is a naive loop. Slow on purpose.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.h"

namespace sps::testing {

// Parameter names of docs/model.md §2 → row-major values ([out, in] for linear weights).
// `lm_head.weight` is not needed (tied to `transformer.wte.weight`).
using NamedWeights = std::map<std::string, std::vector<double>>;

struct NaiveOutput {
  std::vector<double> logits;  // [B, T, V], read at the family's readout slot of pair i
  std::vector<double> nll;     // [B, T], −log p(y_i) for every position (kept or not)
  std::vector<int> keep;       // [B, T], 1 iff x_i ≠ EOS and x_i ≠ PAD (docs/model.md §5)
  double loss = 0.0;           // Σ nll·keep / Σ keep (0 when nothing is kept)
};

// Forward of a batch of B rows of T tokens. y may hold any value in [0, V) at positions
// that are not kept; y_i < 0 or ≥ V gives nll = NaN there.
NaiveOutput naive_forward(const ModelConfig& cfg, const NamedWeights& w,
                          const std::vector<int32_t>& x, const std::vector<int32_t>& y,
                          int64_t B, int64_t T);

// The scoring windows of the rolling protocol of docs/model.md §8 for a document of n tokens with
// context `context`: window k predicts tokens [start, end) of the document from the input
// row `inputs` (whose last end − start positions are the scored ones).
struct RollingWindow {
  std::vector<int32_t> inputs;   // model input, length min(context, n)
  std::vector<int32_t> targets;  // same length: inputs shifted by one
  int64_t start = 0;             // first predicted document token
  int64_t end = 0;               // one past the last predicted document token
};
std::vector<RollingWindow> naive_rolling_windows(const std::vector<int32_t>& doc,
                                                 int64_t context, int32_t eos);

// docs/model.md §8 rolling log-likelihood (natural log, summed over every document token) of one
// document, running the model with T = context (or the document length when shorter).
double naive_rolling_loglik(const ModelConfig& cfg, const NamedWeights& w,
                            const std::vector<int32_t>& doc, int64_t context);

}  // namespace sps::testing
