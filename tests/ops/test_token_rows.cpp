// The rows of an embedding backward grouped by token (ops/token_rows.h): every row once, each
// token's rows together and in row order, the long tokens first and cut into runs that never
// span two tokens, and each long token's runs listed; checked against a plain grouping.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "ops/token_rows.h"

namespace sps {
namespace {

void expect_plan_of(const std::vector<int32_t>& tokens, int64_t vocab, int64_t run) {
  const int64_t n = int64_t(tokens.size());
  SCOPED_TRACE("n " + std::to_string(n) + ", run " + std::to_string(run));
  std::map<int32_t, std::vector<int32_t>> rows_of;  // by id, rows in order
  for (int64_t i = 0; i < n; ++i) rows_of[tokens[i]].push_back(int32_t(i));
  std::vector<std::vector<int32_t>> groups;  // long ids first, each kind in id order
  for (const bool long_ids : {true, false})
    for (const auto& [id, rows] : rows_of)
      if ((int64_t(rows.size()) > run) == long_ids) groups.push_back(rows);

  ops::TokenRowPlan plan;
  plan.order.assign(3, -1);  // a reused plan starts over
  plan.long_tokens = 5;
  ops::plan_token_rows(plan, tokens.data(), n, vocab, run);
  ASSERT_EQ(plan.tokens, int64_t(groups.size()));
  ASSERT_EQ(plan.token_starts.size(), groups.size() + 1);
  std::vector<int32_t> order;
  int64_t long_tokens = 0, runs = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    EXPECT_EQ(plan.token_starts[g], int32_t(order.size()));
    order.insert(order.end(), groups[g].begin(), groups[g].end());
    if (int64_t(groups[g].size()) > run) {
      ++long_tokens;
      EXPECT_EQ(plan.token_runs[g], runs);
      for (int64_t s = plan.token_starts[g]; s < int64_t(order.size()); s += run)
        EXPECT_EQ(plan.run_starts[runs++], s);
    }
  }
  EXPECT_EQ(plan.order, order);
  EXPECT_EQ(plan.token_starts.back(), n);
  EXPECT_EQ(plan.long_tokens, long_tokens);
  EXPECT_EQ(plan.runs, runs);
  ASSERT_EQ(plan.run_starts.size(), size_t(runs + 1));
  ASSERT_EQ(plan.token_runs.size(), size_t(long_tokens + 1));
  EXPECT_EQ(plan.token_runs.back(), runs);
  // The last run ends where the long tokens' rows end.
  EXPECT_EQ(plan.run_starts.back(), plan.token_starts[long_tokens]);

  // The packed arrays, viewed as a backend reads them.
  const std::vector<int32_t> packed = plan.packed();
  const ops::TokenRows view = plan.view(packed.data());
  EXPECT_EQ(std::vector<int32_t>(view.order, view.order + n), plan.order);
  EXPECT_EQ(view.token_runs[long_tokens], runs);
  EXPECT_EQ(view.run_starts[runs], plan.token_starts[long_tokens]);
  EXPECT_EQ(view.token_starts[plan.tokens], n);
  EXPECT_EQ(int64_t(packed.size()), n + plan.tokens + 1 + runs + 1 + long_tokens + 1);
}

TEST(TokenRows, GroupsRowsByTokenWithTheLongTokensCutIntoRuns) {
  std::mt19937 rng(5);
  for (const int64_t run : {1, 3, 64}) {
    // An interleaved family's slot tokens: half PREDICT, the other half a few repeated ids.
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(i % 2 ? 61 : int32_t(rng() % 9));
    expect_plan_of(tokens, 64, run);
    expect_plan_of({}, 64, run);
    expect_plan_of({5}, 64, run);
    expect_plan_of(std::vector<int32_t>(130, 2), 64, run);  // one id only: runs, the last short
    std::vector<int32_t> distinct(64);
    for (int32_t i = 0; i < 64; ++i) distinct[i] = 63 - i;  // every id once, no long token
    expect_plan_of(distinct, 64, run);
  }
}

}  // namespace
}  // namespace sps
