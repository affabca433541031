#include "ops/token_rows.h"

#include <algorithm>

#include "util/error.h"

namespace sps::ops {

void plan_token_rows(TokenRowPlan& plan, const int32_t* tokens, int64_t n, int64_t vocab,
                     int64_t run) {
  SPS_ASSERT(n >= 0 && n < (int64_t(1) << 31) && vocab > 0 && run > 0);
  std::vector<int32_t>& counts = plan.counts;
  counts.assign(size_t(vocab), 0);
  for (int64_t i = 0; i < n; ++i) {
    SPS_ASSERT(tokens[i] >= 0 && tokens[i] < vocab);
    ++counts[tokens[i]];
  }
  // Long ids first, then short ones, each in id order; `next` holds each id's next place in
  // `order`.
  std::vector<int32_t>& next = plan.next;
  next.resize(size_t(vocab));
  plan.token_starts.clear();
  plan.long_tokens = 0;
  int32_t at = 0;
  for (const bool long_ids : {true, false})
    for (int64_t id = 0; id < vocab; ++id) {
      const int32_t count = counts[id];
      if (count == 0 || (count > run) != long_ids) continue;
      plan.token_starts.push_back(at);
      next[id] = at;
      at += count;
      plan.long_tokens += long_ids;
    }
  plan.tokens = int64_t(plan.token_starts.size());
  plan.token_starts.push_back(at);
  plan.order.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) plan.order[next[tokens[i]]++] = int32_t(i);

  plan.run_starts.clear();
  plan.token_runs.clear();
  for (int64_t g = 0; g < plan.long_tokens; ++g) {
    plan.token_runs.push_back(int32_t(plan.run_starts.size()));
    for (int32_t s = plan.token_starts[g]; s < plan.token_starts[g + 1]; s += int32_t(run))
      plan.run_starts.push_back(s);
  }
  plan.runs = int64_t(plan.run_starts.size());
  plan.token_runs.push_back(int32_t(plan.runs));
  plan.run_starts.push_back(plan.token_starts[plan.long_tokens]);
}

TokenRows TokenRowPlan::view(const int32_t* packed) const {
  TokenRows rows;
  rows.order = packed;
  rows.token_starts = rows.order + order.size();
  rows.run_starts = rows.token_starts + token_starts.size();
  rows.token_runs = rows.run_starts + run_starts.size();
  rows.tokens = tokens;
  rows.long_tokens = long_tokens;
  rows.runs = runs;
  return rows;
}

std::vector<int32_t> TokenRowPlan::packed() const {
  std::vector<int32_t> all(order);
  for (const std::vector<int32_t>* part : {&token_starts, &run_starts, &token_runs})
    all.insert(all.end(), part->begin(), part->end());
  return all;
}

}  // namespace sps::ops
