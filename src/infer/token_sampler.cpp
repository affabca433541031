#include "infer/token_sampler.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"
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
  const int64_t allowed = std::count(banned_.begin(), banned_.end(), uint8_t(0));
  if (allowed == 0) fail("every id is forbidden: nothing can be generated");
  if (greedy())
    candidates_needed_ = 1;
  else if (options.top_k > 0 && options.top_k < allowed && options.top_k <= ops::kMaxTopK)
    candidates_needed_ = options.top_k;
}

Rng TokenSampler::row_rng(uint64_t seed, int64_t row) {
  uint64_t state = seed;
  const uint64_t base = splitmix64(state);
  return Rng(base ^ (0x9E3779B97F4A7C15ull * uint64_t(row + 1)));
}

namespace {

// The most likely first; ties by id, so the order (and top-k = 1 = greedy) is exact.
template <typename Candidate>
bool more_likely(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

[[noreturn]] void fail_nonfinite(int64_t id) {
  fail("the model produced a non-finite logit for id {}: non-finite weights or activations", id);
}

}  // namespace

int32_t TokenSampler::sample(const float* logits, Rng& rng) const {
  // NaN compares false with everything: without this, broken weights emit arbitrary ids.
  const int64_t nonfinite = first_nonfinite(logits);
  if (nonfinite >= 0) fail_nonfinite(nonfinite);
  return sample_finite(logits, rng);
}

int64_t TokenSampler::first_nonfinite(const float* logits) const {
  for (int64_t id = 0; id < V_; ++id)
    if (!std::isfinite(logits[id])) return id;
  return -1;
}

int32_t TokenSampler::sample_finite(const float* logits, Rng& rng) const {
  std::vector<Candidate>& candidates = scratch();
  candidates.clear();
  for (int64_t id = 0; id < V_; ++id)
    if (!banned_[id]) candidates.push_back({int32_t(id), logits[id], 0});
  int64_t n = int64_t(candidates.size());
  const int64_t top_k = greedy() ? 1 : options_.top_k;
  if (top_k > 0 && top_k < n) {
    // The order ops::top_k_rows gives a decoder.
    std::partial_sort(candidates.begin(), candidates.begin() + top_k, candidates.end(),
                      more_likely<Candidate>);
    n = top_k;
  }
  return greedy() ? candidates[0].id : draw(candidates, n, rng);
}

std::vector<TokenSampler::Candidate>& TokenSampler::scratch() {
  thread_local std::vector<Candidate> candidates;
  return candidates;
}

int32_t TokenSampler::sample_candidates(const int32_t* ids, const float* logits,
                                        int32_t nonfinite, Rng& rng) const {
  SPS_ASSERT(candidates_needed_ > 0);
  if (nonfinite >= 0) fail_nonfinite(nonfinite);
  if (greedy()) return ids[0];
  std::vector<Candidate>& candidates = scratch();
  candidates.clear();
  for (int64_t k = 0; k < candidates_needed_; ++k) candidates.push_back({ids[k], logits[k], 0});
  return draw(candidates, candidates_needed_, rng);
}

void TokenSampler::next_tokens(Decoder<float>& decoder, int64_t first, int64_t rows, Rng* rngs,
                               int32_t* tokens, const uint8_t* skip) {
  const int64_t k = candidates_needed_;
  if (k == 0) {
    // Rows draw side by side (an exp per allowed id each); each from its own stream, so the
    // tokens do not depend on the threads.
    const float* logits = decoder.logits();
    top_nonfinite_.assign(size_t(rows), -1);
#pragma omp parallel for schedule(dynamic, 1) if (rows > 1)
    for (int64_t i = 0; i < rows; ++i) {
      if (skip && skip[i]) continue;
      const float* row = logits + (first + i) * V_;
      top_nonfinite_[i] = int32_t(first_nonfinite(row));
      if (top_nonfinite_[i] < 0) tokens[i] = sample_finite(row, rngs[i]);
    }
    for (const int32_t id : top_nonfinite_)
      if (id >= 0) fail_nonfinite(id);
    return;
  }
  top_ids_.resize(size_t(rows * k));
  top_logits_.resize(size_t(rows * k));
  top_nonfinite_.resize(size_t(rows));
  decoder.top_k(first, rows, k, banned_, top_ids_.data(), top_logits_.data(),
                top_nonfinite_.data());
  for (int64_t i = 0; i < rows; ++i)
    if (!skip || !skip[i])
      tokens[i] = sample_candidates(top_ids_.data() + i * k, top_logits_.data() + i * k,
                                    top_nonfinite_[i], rngs[i]);
}

int32_t TokenSampler::draw(std::vector<Candidate>& candidates, int64_t n, Rng& rng) const {
  float max_logit = candidates[0].logit;
  for (int64_t k = 1; k < n; ++k) max_logit = std::max(max_logit, candidates[k].logit);
  const double inv_t = 1.0 / options_.temperature;
  double total = 0;
  for (int64_t k = 0; k < n; ++k) {
    Candidate& c = candidates[k];
    c.weight = std::exp((double(c.logit) - double(max_logit)) * inv_t);
    total += c.weight;
  }
  if (options_.top_p < 1) {
    // Grow a sorted prefix of the most likely ids until it holds top_p of the mass.
    const double target = options_.top_p * total;
    for (int64_t m = std::min<int64_t>(n, 64);; m = std::min(n, 4 * m)) {
      std::partial_sort(candidates.begin(), candidates.begin() + m, candidates.begin() + n,
                        more_likely<Candidate>);
      double mass = 0;
      int64_t keep = 0;
      while (keep < m && mass < target) mass += candidates[keep++].weight;
      if (mass >= target || m == n) {
        n = keep;
        total = mass;
        break;
      }
    }
  }
  double u = rng.uniform() * total;
  for (int64_t k = 0; k < n; ++k) {
    u -= candidates[k].weight;
    if (u < 0) return candidates[k].id;
  }
  return candidates[n - 1].id;  // rounding left u just above 0
}

}  // namespace sps
