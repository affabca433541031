// Continuation scoring and the zero-shot tasks: log-likelihood equals the training forward's
// NLLs, left-padding invariance, the T + 1 cut, greedy match, acc vs acc_norm, HellaSwag
// cleaning, the task files' schemas and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "eval/scoring.h"
#include "eval/tasks.h"
#include "eval_fixtures.h"
#include "util/error.h"
#include "util/temp_dir.h"
#include "util/user_error.h"

namespace sps::testing {
namespace {

using namespace sps::eval;

std::vector<int32_t> seq(int64_t n, int32_t salt) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t((i * 37 + salt * 11 + 5) % 256);
  return v;
}

// Σ log p of the last `c` targets of one unpadded training forward over `tokens`.
double forward_loglik(Model<double>& model, const std::vector<int32_t>& tokens, int64_t c) {
  const int64_t L = int64_t(tokens.size()) - 1;
  std::vector<int32_t> x(tokens.begin(), tokens.end() - 1), y(tokens.begin() + 1, tokens.end());
  std::vector<double> nll(static_cast<size_t>(L));
  model.forward(x.data(), y.data(), 1, L, {nll.data(), nullptr});
  double s = 0;
  for (int64_t k = L - c; k < L; ++k) s -= nll[size_t(k)];
  return s;
}

class Scoring : public ::testing::TestWithParam<std::pair<std::string, int64_t>> {};

TEST_P(Scoring, LoglikIsTheTrainingForwardsNllAndPaddingInvariant) {
  Model<double> model(small_eval_config(GetParam().first, GetParam().second));
  model.init_weights(7);
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.context = seq(1 + 2 * i, i);
    r.continuation = seq(1 + i % 3, 100 + i);
    requests.push_back(r);
  }
  requests.push_back({{}, seq(3, 9), false});  // empty context reads EOS
  for (int64_t batch : {1, 3, 16}) {
    const auto scores = score_requests(model, requests, batch);
    for (size_t i = 0; i < requests.size(); ++i) {
      std::vector<int32_t> all = requests[i].context.empty() ? std::vector<int32_t>{256}
                                                             : requests[i].context;
      all.insert(all.end(), requests[i].continuation.begin(), requests[i].continuation.end());
      const double want = forward_loglik(model, all, int64_t(requests[i].continuation.size()));
      EXPECT_NEAR(scores[i].loglik, want, 1e-10 * std::abs(want)) << "request " << i << " batch " << batch;
      EXPECT_EQ(scores[i].tokens, int64_t(requests[i].continuation.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Scoring,
                         ::testing::Values(std::pair<std::string, int64_t>{"standard", 0},
                                           std::pair<std::string, int64_t>{"sps", 0},
                                           std::pair<std::string, int64_t>{"sps", 2},
                                           std::pair<std::string, int64_t>{"reverse_sps", 2},
                                           std::pair<std::string, int64_t>{"delayed_state", 2}));

TEST(ScoringCut, ContextAndContinuationCutToTheLastTPlusOneTokens) {
  Model<double> model(small_eval_config("sps", 2, 8));
  model.init_weights(3);
  Request r{seq(20, 1), seq(3, 2), false};
  std::vector<int32_t> all = r.context;
  all.insert(all.end(), r.continuation.begin(), r.continuation.end());
  const std::vector<int32_t> last(all.end() - 9, all.end());
  const auto s = score_requests(model, {r, Request{seq(2, 5), seq(1, 6), false}}, 2);
  EXPECT_NEAR(s[0].loglik, forward_loglik(model, last, 3), 1e-10);
  // A continuation longer than T keeps its last T tokens.
  Request longer{seq(2, 1), seq(12, 3), false};
  const auto s2 = score_requests(model, {longer}, 1);
  EXPECT_EQ(s2[0].tokens, 8);
}

TEST(ScoringGreedy, ExactMatchIsEveryTokenTheArgmax) {
  Model<double> model(small_eval_config("sps", 2));
  model.init_weights(11);
  const auto context = seq(5, 4);
  // The model's own greedy continuation matches; changing its last token breaks the match.
  std::vector<int32_t> tokens = context, cont;
  for (int step = 0; step < 3; ++step) {
    const int64_t L = int64_t(tokens.size());
    std::vector<int32_t> y(tokens.begin() + 1, tokens.end());
    y.push_back(0);
    std::vector<double> logits(static_cast<size_t>(L * 320));
    model.forward(tokens.data(), y.data(), 1, L, {nullptr, logits.data()});
    const double* row = logits.data() + (L - 1) * 320;
    const int32_t best = int32_t(std::max_element(row, row + 320) - row);
    tokens.push_back(best);
    cont.push_back(best);
  }
  std::vector<int32_t> wrong = cont;
  wrong.back() = (wrong.back() + 1) % 256;
  const auto s = score_requests(model, {{context, cont, true}, {context, wrong, true}}, 2);
  EXPECT_TRUE(s[0].greedy);
  EXPECT_FALSE(s[1].greedy);
  EXPECT_GT(s[0].loglik, s[1].loglik);
}

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TaskMetrics, AccAndAccNormDisagreeOnAHandMadeItem) {
  TempDir dir;
  const std::string path = write_file(
      dir, "arc.jsonl",
      R"({"question": "Pick", "choices": {"text": ["a", "abcdefgh"], "label": ["A", "B"]}, "answerKey": "B"})"
      "\n");
  const TaskData task = load_task("arc_easy", path);
  ASSERT_EQ(task.items.size(), 1u);
  EXPECT_EQ(task.items[0].context, "Question: Pick\nAnswer:");
  EXPECT_EQ(task.items[0].continuations[1], " abcdefgh");
  EXPECT_EQ(task.items[0].gold, 1);
  // " a": −3 over 2 characters (−1.5 each); " abcdefgh": −4 over 9 (−0.44 each).
  const TaskResult r = task_metrics(task, {{-3.0, false, 1}, {-4.0, false, 8}});
  EXPECT_EQ(r.acc, 0.0);
  EXPECT_EQ(r.acc_norm, 1.0);
}

TEST(TaskMetrics, LambadaExactMatchAndPerplexity) {
  TempDir dir;
  const std::string path = write_file(dir, "l.jsonl",
                                      "{\"text\": \"the cat sat on the mat\"}\n\n{\"text\": \"a b\"}\n");
  const TaskData task = load_task("lambada_openai", path);
  ASSERT_EQ(task.items.size(), 2u);
  EXPECT_EQ(task.items[0].context, "the cat sat on the");
  EXPECT_EQ(task.items[0].continuations[0], " mat");
  const TaskResult r = task_metrics(task, {{-2.0, true, 2}, {-4.0, false, 2}});
  EXPECT_EQ(r.acc, 0.5);
  EXPECT_NEAR(r.perplexity, std::exp(6.0 / 4.0), 1e-12);
}

TEST(Hellaswag, CleaningMatchesThePythonPreprocess) {
  // Expected values from the Python of docs/model.md §8 (strip, " [title]" → ". ", re.sub("\[.*?\]"),
  // "  " → " ").
  EXPECT_EQ(hellaswag_clean("  Making a cake [title] Mix the flour.  "), "Making a cake. Mix the flour.");
  EXPECT_EQ(hellaswag_clean("A man [header] is [step] talking"), "A man is talking");
  EXPECT_EQ(hellaswag_clean("two  spaces   three"), "two spaces  three");
  EXPECT_EQ(hellaswag_clean("[x]start"), "start");
  EXPECT_EQ(hellaswag_clean("unclosed [bracket"), "unclosed [bracket");
  EXPECT_EQ(hellaswag_clean("a [b\nc] d"), "a [b\nc] d");
  EXPECT_EQ(hellaswag_clean("end [title]"), "end. ");
  EXPECT_EQ(python_capitalize("tHEN the MAN"), "Then the man");
  TempDir dir;
  const std::string path = write_file(
      dir, "h.jsonl",
      R"({"activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow covering the window of a car, and a woman wearing winter clothes smiles.", "ctx_b": "then", "endings": [", the man adds wax to the windshield [title] and cuts it.", "x", "y", "z"], "label": "3"})"
      "\n");
  const TaskData task = load_task("hellaswag", path);
  EXPECT_EQ(task.items[0].context,
            "Removing ice from car: Then, the man writes over the snow covering the window of a "
            "car, and a woman wearing winter clothes smiles. Then");
  EXPECT_EQ(task.items[0].continuations[0], " , the man adds wax to the windshield. and cuts it.");
  EXPECT_EQ(task.items[0].gold, 3);
}

TEST(TaskFiles, SchemasOfPiqaSciq) {
  TempDir dir;
  const auto piqa = load_task("piqa", write_file(dir, "p.jsonl",
      R"({"goal": "Open a jar", "sol1": "twist", "sol2": "smash", "label": 0})" "\n"));
  EXPECT_EQ(piqa.items[0].context, "Question: Open a jar\nAnswer:");
  EXPECT_EQ(piqa.items[0].continuations, (std::vector<std::string>{" twist", " smash"}));
  const auto sciq = load_task("sciq", write_file(dir, "s.jsonl",
      R"({"question": "Q?", "distractor1": "d1", "distractor2": "d2", "distractor3": "d3", "correct_answer": "ok", "support": "  Facts."})" "\n"));
  EXPECT_EQ(sciq.items[0].context, "Facts.\nQuestion: Q?\nAnswer:");
  EXPECT_EQ(sciq.items[0].continuations.back(), " ok");
  EXPECT_EQ(sciq.items[0].gold, 3);
}

TEST(TaskFiles, BadInputIsOneClearLine) {
  TempDir dir;
  const auto bad = write_file(dir, "bad.jsonl", R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 1})"
                                               "\n{not json\n");
  EXPECT_EQ(error_of([&] { load_task("piqa", bad); }), bad + ":2: not a JSON object");
  const auto missing = write_file(dir, "m.jsonl", R"({"goal": "g", "sol1": "a", "label": 1})" "\n");
  EXPECT_EQ(error_of([&] { load_task("piqa", missing); }), missing + ":1: field \"sol2\" is missing");
  const auto empty = write_file(dir, "e.jsonl", "\n");
  EXPECT_EQ(error_of([&] { load_task("piqa", empty); }), empty + ": no items in the piqa task file");
  const auto range = write_file(dir, "r.jsonl", R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 2})" "\n");
  EXPECT_NE(error_of([&] { load_task("piqa", range); }).find("out of range"), std::string::npos);
}

TEST(Tasks, RunTaskEndToEndOnATinyModel) {
  TempDir dir;
  const auto path = write_file(dir, "p.jsonl",
      R"({"goal": "Open a jar", "sol1": "twist", "sol2": "smash it", "label": 0})" "\n"
      R"({"goal": "Dry hands", "sol1": "towel", "sol2": "water", "label": 0})" "\n");
  Model<float> model(small_eval_config());
  model.init_weights(1);
  const auto tok = byte_tokenizer();
  const TaskData task = load_task("piqa", path);
  const TaskResult r = run_task(model, tok, task, 4);
  EXPECT_EQ(r.items, 2);
  EXPECT_GE(r.acc, 0.0);
  EXPECT_LE(r.acc, 1.0);
}

}  // namespace
}  // namespace sps::testing
