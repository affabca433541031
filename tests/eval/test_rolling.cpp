// Rolling corpus log-likelihood (docs/model.md §8): the golden values of tests/golden for every
// family, window coverage against the naive reference, batching and padding invariance,
// and Python's re.split(r"\s+") word count.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/rolling.h"
#include "model/golden.h"
#include "model/naive_model.h"
#include "model/weights_io.h"

namespace sps::testing {
namespace {

using eval::rolling_logliks;
using eval::rolling_windows;

// The cases with rolling values (the ω case has none).
std::vector<std::string> rolling_cases() {
  std::vector<std::string> names;
  for (const auto& name : kGoldenCases)
    if (name.find("omega") == std::string::npos) names.push_back(name);
  return names;
}

class RollingGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SPS_REQUIRE_GOLDEN();
  }
  template <typename T>
  void check(double tol) {
    const auto all = golden_cases_json();
    nlohmann::json entry;
    for (const auto& e : all["cases"])
      if (e["case"] == GetParam()) entry = e;
    const ModelConfig cfg = golden_config(all, entry);
    Model<T> model(cfg);
    load_weights(kGoldenDir + "/" + GetParam() + ".weights.safetensors", model.params(),
                 model.weights());
    ASSERT_TRUE(entry.contains("rolling_loglik")) << GetParam();
    const std::vector<int32_t> doc = entry["rolling_document"].get<std::vector<int32_t>>();
    ASSERT_EQ(int64_t(entry["rolling_context"]), 12);
    for (const auto& [context, key] :
         std::vector<std::pair<int64_t, std::string>>{{12, "rolling_loglik"},
                                                      {5, "rolling_loglik_context5"}}) {
      const double want = entry[key];
      for (int64_t batch : {1, 2, 7}) {
        // The document alone, and among shorter documents (left-padded first windows).
        const auto one = rolling_logliks(model, {doc}, context, batch);
        EXPECT_NEAR(one[0], want, tol * std::abs(want)) << key << " batch " << batch;
        std::vector<std::vector<int32_t>> docs = {std::vector<int32_t>(doc.begin(), doc.begin() + 3),
                                                  doc, std::vector<int32_t>(doc.begin(), doc.begin() + 1),
                                                  {}, doc};
        const auto many = rolling_logliks(model, docs, context, batch);
        EXPECT_NEAR(many[1], want, tol * std::abs(want)) << key << " batch " << batch;
        EXPECT_NEAR(many[4], want, tol * std::abs(want));
        EXPECT_EQ(many[3], 0.0);
        const auto short3 = rolling_logliks(model, {docs[0]}, context, 1);
        EXPECT_NEAR(many[0], short3[0], tol * std::abs(short3[0]));
      }
    }
  }
};

TEST_P(RollingGolden, Double) { check<double>(1e-10); }
TEST_P(RollingGolden, Float) { check<float>(1e-5); }

INSTANTIATE_TEST_SUITE_P(Cases, RollingGolden, ::testing::ValuesIn(rolling_cases()));

TEST(RollingWindows, ScoreEveryTokenOnceWithTheStatedContext) {
  for (int64_t context : {1, 2, 5, 12}) {
    for (int64_t n = 0; n <= 4 * context + 2; ++n) {
      std::vector<int32_t> doc(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) doc[size_t(i)] = int32_t(i);
      const auto windows = rolling_windows(n, context);
      const auto naive = naive_rolling_windows(doc, context, -1);
      ASSERT_EQ(windows.size(), naive.size()) << "n " << n << " context " << context;
      std::vector<int> scored(size_t(n), 0);
      for (size_t k = 0; k < windows.size(); ++k) {
        const auto& w = windows[k];
        EXPECT_EQ(w.start, naive[k].start);
        EXPECT_EQ(w.end, naive[k].end);
        EXPECT_EQ(w.length, int64_t(naive[k].inputs.size()));
        EXPECT_LE(w.end - w.start, context);
        EXPECT_LE(w.length, context);
        // The inputs the evaluator reads (−1 = EOS) are the naive ones.
        for (int64_t i = 0; i < w.length; ++i) {
          const int64_t in = w.end - 1 - w.length + i;
          EXPECT_EQ(in < 0 ? -1 : doc[size_t(in)], naive[k].inputs[size_t(i)]);
          EXPECT_EQ(doc[size_t(in + 1)], naive[k].targets[size_t(i)]);
        }
        // Every window but a document's first reads T inputs; token t is predicted from the
        // `seen` tokens just before it (EOS first): all of them in the first window, and the
        // last token of every window from min(end, T) of them.
        if (k > 0) {
          EXPECT_EQ(w.length, context);
        }
        for (int64_t t = w.start; t < w.end; ++t) {
          ++scored[size_t(t)];
          const int64_t seen = t - (w.end - 1 - w.length);
          EXPECT_GE(seen, 1);
          EXPECT_LE(seen, context);
          if (k == 0) {
            EXPECT_EQ(seen, t + 1) << "token " << t;
          }
          if (t == w.end - 1) {
            EXPECT_EQ(seen, std::min(w.end, context)) << "token " << t;
          }
        }
      }
      for (int64_t t = 0; t < n; ++t) EXPECT_EQ(scored[size_t(t)], 1) << "token " << t;
    }
  }
}

TEST(WhitespaceWords, CountsLikePythonReSplit) {
  using eval::whitespace_words;
  // len(re.split(r"\s+", s)) in Python 3 for each string.
  EXPECT_EQ(whitespace_words(""), 1);
  EXPECT_EQ(whitespace_words("word"), 1);
  EXPECT_EQ(whitespace_words("two words"), 2);
  EXPECT_EQ(whitespace_words(" lead"), 2);
  EXPECT_EQ(whitespace_words("trail "), 2);
  EXPECT_EQ(whitespace_words("  both \n"), 3);
  EXPECT_EQ(whitespace_words("a\tb\t\tc"), 3);
  EXPECT_EQ(whitespace_words("a \t\r\n\v\f b"), 2);
  EXPECT_EQ(whitespace_words(" "), 2);
  EXPECT_EQ(whitespace_words("\t\t"), 2);
  EXPECT_EQ(whitespace_words("a\xc2\xa0" "b"), 2);          // U+00A0 no-break space
  EXPECT_EQ(whitespace_words("a\xe3\x80\x80" "b"), 2);      // U+3000 ideographic space
  EXPECT_EQ(whitespace_words("a\xe2\x80\x8b" "b"), 1);      // U+200B is not white space
  EXPECT_EQ(whitespace_words("caf\xc3\xa9 ol\xc3\xa9"), 2);
  EXPECT_EQ(whitespace_words("a\x1f" "b"), 2);              // unit separator is \s in Python
  EXPECT_EQ(whitespace_words("bad\xff byte"), 2);
}

}  // namespace
}  // namespace sps::testing
