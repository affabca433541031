#pragma once
// The log-probability of a chosen token under the model's distribution (softmax of its logits,
// temperature 1, before any sampling filter), and the most likely alternatives: what
// `logprobs` reports in the generator and the server.
#include <cstdint>
#include <utility>
#include <vector>

namespace sps {

struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;  // the most likely ids, most likely first
};

// Token `id` of a row of V logits, with its `top` most likely alternatives among the ids below
// `visible_ids` (a tokenizer's ids: PREDICT and PAD lie beyond), the lower id first on a tie.
TokenLogprob token_logprob(const float* logits, int64_t V, int32_t id, int64_t top,
                           int64_t visible_ids);

}  // namespace sps
