#pragma once
// Log-likelihood of continuations given contexts (zero-shot tasks, docs/model.md §8): the sequence
// context + continuation is cut to its last T + 1 tokens, the model reads all but the last
// and the continuation's tokens are scored. An empty context reads EOS instead.
//
// Two ways to compute the same numbers:
//   naive  — one training forward per request over its whole cut sequence; requests are
//            batched by length (longest first) and left-padded with PAD.
//   shared — the requests that read the same prompt (the cut sequence before its scored
//            tokens: a multiple-choice item's context) share one prefill through the cached
//            decoder (docs/model.md §7); each request then forks that row and feeds its scored tokens
//            in one extend. Prompts are prefilled `batch` per forward, longest first;
//            forked rows are extended longest continuation first, so rows of one extend
//            need little padding. Requests that feed an EOS (a document would end inside
//            the extend) are scored naively.
#include <cstdint>
#include <string>
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

enum class Scoring { naive, shared };
// "naive" | "shared"; anything else is a UserError.
Scoring scoring_from_name(const std::string& name);
const char* scoring_name(Scoring scoring);

// A request as its model row: seq = (context or [EOS]) + continuation, ids checked against
// the vocabulary (UserError), cut to its last T + 1 tokens; its last `scored` tokens are the
// continuation's (all of them unless the cut reached into the continuation).
struct CutRequest {
  std::vector<int32_t> seq;
  int64_t scored = 0;
};
CutRequest cut_request(const Request& request, const ModelConfig& config);

// Naive scoring. `batch` rows per forward; requests that ask for greedy run in batches whose logits stay
// under `logits_budget_bytes`.
template <typename T>
std::vector<Score> score_requests(Model<T>& model, const std::vector<Request>& requests,
                                  int64_t batch, const ProgressCallback& progress = {},
                                  int64_t logits_budget_bytes = int64_t(1) << 30);

// Shared-context scoring (the same scores). `batch` prompts per prefill forward; extends run
// `decode_rows` forked rows at once (0: 4 · batch; fewer when their logits pass 256 MiB). The
// prompt caches held at once stay under `prompt_cache_bytes` (at least one prefill batch).
template <typename T>
std::vector<Score> score_requests_shared(Model<T>& model, const std::vector<Request>& requests,
                                         int64_t batch, const ProgressCallback& progress = {},
                                         int64_t decode_rows = 0,
                                         int64_t prompt_cache_bytes = int64_t(256) << 20);

template <typename T>
std::vector<Score> score_requests(Model<T>& model, const std::vector<Request>& requests,
                                  int64_t batch, Scoring scoring,
                                  const ProgressCallback& progress = {});

}  // namespace sps::eval
