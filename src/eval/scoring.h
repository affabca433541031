#pragma once
// Log-likelihood of continuations given contexts (zero-shot tasks, SPEC §8): the sequence
// context + continuation is cut to its last T + 1 tokens, the model reads all but the last
// and the continuation's tokens are scored. Requests are batched by length (longest first)
// and left-padded with PAD. An empty context reads EOS instead.
#include <cstdint>
#include <vector>

#include "eval/rolling.h"
#include "model/model.h"

namespace sps::eval {

struct Request {
  std::vector<int32_t> context;
  std::vector<int32_t> continuation;  // at least one token
  bool greedy = false;                // also report whether every token is the argmax
};

struct Score {
  double loglik = 0;       // Σ log p(continuation token), nats
  bool greedy = false;     // every continuation token is the model's argmax (when asked)
  int64_t tokens = 0;      // continuation tokens scored
};

// `batch` rows per forward; requests that ask for greedy run in batches whose logits stay
// under `logits_budget_bytes`.
template <typename T>
std::vector<Score> score_requests(Model<T>& model, const std::vector<Request>& requests,
                                  int64_t batch, const Progress& progress = {},
                                  int64_t logits_budget_bytes = int64_t(1) << 30);

}  // namespace sps::eval
