// Shared-context scoring equals naive scoring: every request's log-likelihood (float, 1e-4
// relative), token count and greedy flag, for every family including w = 0 and w ≥ T, with an
// EOS inside a context or a continuation, an empty context, cuts that reach into the context
// differently per choice, and any prefill / decode batch sizes; and task accuracies are
// unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "eval/scoring.h"
#include "eval/tasks.h"
#include "eval_fixtures.h"
#include "util/error.h"

namespace sps::testing {
namespace {

using namespace sps::eval;

std::vector<int32_t> tokens(int64_t n, int32_t salt) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t((i * 53 + salt * 29 + 3) % 256);
  return v;
}

// The model's own greedy continuation of `context` (n tokens), from training forwards.
std::vector<int32_t> greedy_continuation(Model<float>& model, std::vector<int32_t> context, int n) {
  const int64_t V = model.config().vocab_size;
  std::vector<int32_t> out;
  for (int k = 0; k < n; ++k) {
    const int64_t L = int64_t(context.size());
    std::vector<double> logits(static_cast<size_t>(L * V));
    model.forward(context.data(), context.data(), 1, L, {nullptr, logits.data()});
    const double* row = logits.data() + (L - 1) * V;
    const int32_t best = int32_t(std::max_element(row, row + V) - row);
    context.push_back(best);
    out.push_back(best);
  }
  return out;
}

// Items of 1 to 4 choices sharing their context (T = 16).
std::vector<Request> item_requests(Model<float>& model) {
  const int32_t eos = int32_t(model.config().eos_token_id);
  std::vector<Request> requests;
  const auto item = [&](const std::vector<int32_t>& context, std::vector<std::vector<int32_t>> choices,
                        bool greedy = false) {
    for (auto& c : choices) requests.push_back({context, std::move(c), greedy});
  };
  item(tokens(5, 1), {tokens(3, 2), tokens(1, 3), tokens(6, 4), tokens(2, 5)});
  std::vector<int32_t> with_eos = tokens(7, 6);
  with_eos[3] = eos;  // a document boundary inside the context
  item(with_eos, {tokens(4, 7), tokens(2, 8)});
  std::vector<int32_t> ends_in_eos = tokens(3, 9);
  ends_in_eos.push_back(eos);
  item(ends_in_eos, {tokens(2, 10), tokens(5, 11)});
  item({}, {tokens(3, 12), tokens(1, 13)});  // an empty context reads EOS
  // ctx + continuation > T + 1: each choice keeps a different part of the context.
  item(tokens(14, 14), {tokens(1, 15), tokens(4, 16), tokens(9, 17)});
  item(tokens(2, 18), {tokens(20, 19)});  // a continuation longer than T
  // An EOS fed inside a continuation (scored naively), and one as its last token.
  item(tokens(4, 21), {{5, 6, eos, 7}, {5, 6, 7, eos}, {eos}});
  const auto context = tokens(6, 20);
  auto wrong = greedy_continuation(model, context, 3);
  item(context, {greedy_continuation(model, context, 3)}, true);
  wrong.back() = (wrong.back() + 1) % 256;
  item(context, {wrong}, true);
  return requests;
}

struct Case {
  std::string family;
  int64_t window;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.family << " w=" << c.window; }

class SharedScoring : public ::testing::TestWithParam<Case> {};

TEST_P(SharedScoring, EqualsNaiveScoring) {
  Model<float> model(small_eval_config(GetParam().family, GetParam().window, 16));
  model.init_weights(21);
  const auto requests = item_requests(model);
  const auto naive = score_requests(model, requests, 4);
  ASSERT_TRUE(naive[naive.size() - 2].greedy);  // the greedy case is a real one
  ASSERT_FALSE(naive.back().greedy);
  // A budget of one byte holds one prefill batch of prompts at a time: many chunks, each
  // reusing the decoders of the one before.
  for (int64_t batch : {1, 3, 64})
    for (int64_t decode_rows : {1, 5, 0})
      for (int64_t prompt_cache_bytes : {int64_t(1), int64_t(256) << 20}) {
        const auto shared = score_requests_shared(model, requests, batch, {}, decode_rows,
                                                prompt_cache_bytes);
        ASSERT_EQ(shared.size(), naive.size());
        for (size_t i = 0; i < naive.size(); ++i) {
          EXPECT_NEAR(shared[i].loglik, naive[i].loglik, 1e-4 * std::abs(naive[i].loglik))
              << "request " << i << " batch " << batch << " decode rows " << decode_rows
              << " cache bytes " << prompt_cache_bytes;
          EXPECT_EQ(shared[i].tokens, naive[i].tokens) << "request " << i;
          EXPECT_EQ(shared[i].greedy, naive[i].greedy) << "request " << i;
        }
      }
}

TEST_P(SharedScoring, ProgressCountsEveryRequestOnce) {
  Model<float> model(small_eval_config(GetParam().family, GetParam().window, 16));
  model.init_weights(5);
  const auto requests = item_requests(model);
  int64_t last = 0, total = 0;
  score_requests_shared(model, requests, 2, [&](int64_t done, int64_t all) {
    EXPECT_GT(done, last);
    last = done;
    total = all;
  });
  EXPECT_EQ(last, int64_t(requests.size()));
  EXPECT_EQ(total, int64_t(requests.size()));
}

INSTANTIATE_TEST_SUITE_P(Families, SharedScoring,
                         ::testing::Values(Case{"standard", 0}, Case{"sps", 0}, Case{"sps", 2},
                                           Case{"sps", 16}, Case{"sps", 40},
                                           Case{"reverse_sps", 2}, Case{"delayed_state", 2},
                                           Case{"delayed_state", 0}),
                         [](const auto& info) {
                           return info.param.family + "_w" + std::to_string(info.param.window);
                         });

// A hand-made task: choices of very different lengths (so acc and acc_norm can disagree)
// scored both ways give the same acc and acc_norm.
TEST(SharedScoringTask, AccAndAccNormUnchanged) {
  TaskData task;
  task.name = "continuation";
  const std::vector<std::string> contexts = {"The cat sat on the", "Water boils at",
                                             "She opened the", "In the morning we"};
  const std::vector<std::vector<std::string>> choices = {
      {" mat", " roof of the tall old house", " x", " floor"},
      {" 100 degrees", " noon", " a very high temperature indeed", " z"},
      {" door", " window slowly", " q", " box of chocolates she got"},
      {" ran", " ate breakfast together at home", " s", " slept"}};
  for (size_t i = 0; i < contexts.size(); ++i)
    task.items.push_back({contexts[i], choices[i], int64_t(i % 4)});
  const auto tok = byte_tokenizer();
  Model<float> model(small_eval_config("sps", 2, 32));
  model.init_weights(9);
  const TaskResult naive = run_task(model, tok, task, 3, {}, Scoring::naive);
  const TaskResult shared = run_task(model, tok, task, 3, {}, Scoring::shared);
  EXPECT_EQ(shared.items, 4);
  EXPECT_EQ(shared.acc, naive.acc);
  EXPECT_EQ(shared.acc_norm, naive.acc_norm);
  // And the choices each picks are the naive ones.
  const auto requests = task_requests(task, tok);
  const auto a = score_requests(model, requests, 3, Scoring::naive);
  const auto b = score_requests(model, requests, 3, Scoring::shared);
  for (size_t item = 0; item < 4; ++item) {
    const auto best = [&](const std::vector<Score>& s) {
      size_t arg = 0;
      for (size_t c = 1; c < 4; ++c)
        if (s[item * 4 + c].loglik > s[item * 4 + arg].loglik) arg = c;
      return arg;
    };
    EXPECT_EQ(best(a), best(b)) << "item " << item;
  }
}

TEST(SharedScoringTask, ScoringNames) {
  EXPECT_EQ(scoring_from_name("naive"), Scoring::naive);
  EXPECT_EQ(scoring_from_name("shared"), Scoring::shared);
  EXPECT_STREQ(scoring_name(Scoring::shared), "shared");
  EXPECT_THROW(scoring_from_name("fast"), UserError);
}

}  // namespace
}  // namespace sps::testing
