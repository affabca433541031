#pragma once
// The rows of an embedding's backward grouped by token, for a device that sums each token's
// gradient in a fixed order without atomics (ops.h TokenRows). The host builds it once per
// micro-batch from the tokens it already holds:
//   order         the rows, each token's rows together and in row order; the tokens with more
//                 than `run` rows ("long") first;
//   token_starts  where each token's rows start in order;
//   run_starts    the long tokens' rows cut into runs of at most `run` rows (a run never
//                 spans two tokens), in order;
//   token_runs    each long token's first run.
// A device then sums each run into a partial (pass 1) and each token's partials, or a short
// token's rows, in order into its row of the table (pass 2): every sum has one fixed order
// and the work is spread over runs, not over the columns alone.
#include <cstdint>
#include <vector>

#include "ops/ops.h"

namespace sps::ops {

struct TokenRowPlan {
  std::vector<int32_t> order, token_starts, run_starts, token_runs;
  int64_t tokens = 0, long_tokens = 0, runs = 0;
  std::vector<int32_t> counts, next;  // per id, kept to avoid reallocating

  // order, token_starts, run_starts and token_runs end to end: what a backend's TokenRows
  // points into, once copied to its memory (view).
  std::vector<int32_t> packed() const;
  // The TokenRows of this plan whose packed() arrays are at `packed`.
  TokenRows view(const int32_t* packed) const;
};

// Fills `plan` for tokens[0..n) (ids in [0, vocab)) with runs of at most `run` rows.
void plan_token_rows(TokenRowPlan& plan, const int32_t* tokens, int64_t n, int64_t vocab,
                     int64_t run);

}  // namespace sps::ops
