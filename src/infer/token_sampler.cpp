#include "infer/token_sampler.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace sps {

TokenSampler::TokenSampler(const SamplingOptions& options, const ModelConfig& config)
    : options_(options), V_(config.vocab_size) {
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature))
    fail("--temperature must be a number >= 0 (0 = greedy), got {}", options.temperature);
  if (options.top_k < 0) fail("--top-k must be >= 0 (0 = off), got {}", options.top_k);
  if (!(options.top_p > 0 && options.top_p <= 1))
    fail("--top-p must be in (0, 1], got {}", options.top_p);
  if (options.allowed_ids < 0 || options.allowed_ids > V_)
    fail("allowed ids {} outside the vocabulary of {} ids", options.allowed_ids, V_);
  banned_.assign(V_, 0);
  for (int64_t id = options.allowed_ids > 0 ? options.allowed_ids : V_; id < V_; ++id) banned_[id] = 1;
  banned_[config.pad_token_id] = 1;
  banned_[config.predict_token_id] = 1;
  for (int32_t id : options.forbidden) {
    if (id < 0 || id >= V_) fail("--forbid {}: not an id of the vocabulary [0, {})", id, V_);
    banned_[id] = 1;
  }
  if (std::find(banned_.begin(), banned_.end(), uint8_t(0)) == banned_.end())
    fail("every id is forbidden: nothing can be generated");
  candidates_.reserve(V_);
  weights_.assign(V_, 0.0);
}

Rng TokenSampler::row_rng(uint64_t seed, int64_t row) {
  uint64_t state = seed;
  const uint64_t base = splitmix64(state);
  return Rng(base ^ (0x9E3779B97F4A7C15ull * uint64_t(row + 1)));
}

int32_t TokenSampler::argmax(const float* logits) const {
  int32_t best = -1;
  for (int64_t id = 0; id < V_; ++id)
    if (!banned_[id] && (best < 0 || logits[id] > logits[best])) best = int32_t(id);
  return best;
}

int32_t TokenSampler::sample(const float* logits, Rng& rng) {
  // NaN compares false with everything: without this, broken weights emit arbitrary ids.
  for (int64_t id = 0; id < V_; ++id)
    if (!std::isfinite(logits[id]))
      fail("the model produced a non-finite logit ({}) for id {}: non-finite weights or "
           "activations",
           logits[id], id);
  if (greedy()) return argmax(logits);
  // The most likely first; ties by id, so the order (and top-k = 1 = greedy) is exact.
  const auto more_likely = [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  candidates_.clear();
  for (int64_t id = 0; id < V_; ++id)
    if (!banned_[id]) candidates_.push_back(int32_t(id));
  int64_t n = int64_t(candidates_.size());
  if (options_.top_k > 0 && options_.top_k < n) {
    std::nth_element(candidates_.begin(), candidates_.begin() + (options_.top_k - 1),
                     candidates_.end(), more_likely);
    n = options_.top_k;
  }
  float max_logit = logits[candidates_[0]];
  for (int64_t k = 1; k < n; ++k) max_logit = std::max(max_logit, logits[candidates_[k]]);
  const double inv_t = 1.0 / options_.temperature;
  double total = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int32_t id = candidates_[k];
    weights_[id] = std::exp((double(logits[id]) - double(max_logit)) * inv_t);
    total += weights_[id];
  }
  if (options_.top_p < 1) {
    // Grow a sorted prefix of the most likely ids until it holds top_p of the mass.
    const double target = options_.top_p * total;
    for (int64_t m = std::min<int64_t>(n, 64);; m = std::min(n, 4 * m)) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + m, candidates_.begin() + n,
                        more_likely);
      double mass = 0;
      int64_t keep = 0;
      while (keep < m && mass < target) mass += weights_[candidates_[keep++]];
      if (mass >= target || m == n) {
        n = keep;
        total = mass;
        break;
      }
    }
  }
  double u = rng.uniform() * total;
  for (int64_t k = 0; k < n; ++k) {
    u -= weights_[candidates_[k]];
    if (u < 0) return candidates_[k];
  }
  return candidates_[n - 1];  // rounding left u just above 0
}

}  // namespace sps
