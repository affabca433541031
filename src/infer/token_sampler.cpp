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
                                        Rng& rng) const {
  SPS_ASSERT(candidates_needed_ > 0);
  if (greedy()) return ids[0];
  std::vector<Candidate>& candidates = scratch();
  candidates.clear();
  for (int64_t k = 0; k < candidates_needed_; ++k) candidates.push_back({ids[k], logits[k], 0});
  return draw(candidates, candidates_needed_, rng);
}

void TokenSampler::next_tokens(Decoder<float>& decoder, int64_t rows,
                               const TokenSampler* const* samplers, Rng* const* rngs,
                               int32_t* tokens, const uint8_t* skip) {
  const auto live = [skip](int64_t i) { return !skip || !skip[i]; };
  std::vector<int32_t> nonfinite(size_t(rows), -1), ids;
  std::vector<float> logits;
  std::vector<uint8_t> whole_row(size_t(rows), 0);
  // Runs of rows whose samplers take the same candidates (the same count of the same allowed
  // ids; a server's requests mostly do): one Decoder::top_k each.
  const auto same_candidates = [](const TokenSampler& a, const TokenSampler& b) {
    return &a == &b || (a.candidates_needed_ == b.candidates_needed_ && a.banned_ == b.banned_);
  };
  for (int64_t i = 0; i < rows;) {
    const TokenSampler& sampler = *samplers[i];
    const int64_t k = sampler.candidates_needed_;
    int64_t end = i + 1;
    while (end < rows && same_candidates(*samplers[end], sampler)) ++end;
    if (k == 0) {
      std::fill(whole_row.begin() + i, whole_row.begin() + end, uint8_t(1));
    } else {
      ids.resize(size_t((end - i) * k));
      logits.resize(ids.size());
      decoder.top_k(i, end - i, k, sampler.banned_, ids.data(), logits.data(), &nonfinite[i]);
      for (int64_t j = i; j < end; ++j)
        if (live(j) && nonfinite[j] < 0)
          tokens[j] = samplers[j]->sample_candidates(ids.data() + (j - i) * k,
                                                     logits.data() + (j - i) * k, *rngs[j]);
    }
    i = end;
  }
  // The others draw from their whole rows (an exp per allowed id each), side by side; each
  // from its own stream, so the tokens do not depend on the threads.
  if (std::find(whole_row.begin(), whole_row.end(), 1) != whole_row.end()) {
    const float* all = decoder.logits();
    const int64_t V = decoder.vocab_size();
#pragma omp parallel for schedule(dynamic, 1) if (rows > 1)
    for (int64_t i = 0; i < rows; ++i) {
      if (!whole_row[i] || !live(i)) continue;
      const float* row = all + i * V;
      nonfinite[i] = int32_t(samplers[i]->first_nonfinite(row));
      if (nonfinite[i] < 0) tokens[i] = samplers[i]->sample_finite(row, *rngs[i]);
    }
  }
  for (int64_t i = 0; i < rows; ++i)
    if (live(i) && nonfinite[i] >= 0) fail_nonfinite(nonfinite[i]);
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
