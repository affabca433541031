// AdamW against hand-computed values, the fixed-order squared norm, optimizer state files.
#include <gtest/gtest.h>
#include <omp.h>

#include "model/model_fixtures.h"
#include "model/params.h"
#include "ops/ops.h"
#include "train/optimizer.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

// Two steps by hand (lr 0.1, λ 0.1, β 0.9/0.95, ε 1e-8, w0 = 1):
// step 1, g = 0.5: m = 0.05, v = 0.0125, m̂ = 0.5, √v̂ = 0.5;
//   decayed w = 1·(1 − 0.01) − 0.1·0.5/(0.5 + 1e-8) = 0.890000002, undecayed 0.900000002.
// step 2, g = −0.25: m = 0.02, v = 0.015, m̂ = 0.02/0.19, v̂ = 0.015/0.0975;
//   decayed 0.8542630578558273, undecayed 0.8731630578758274.
TEST(AdamW, TwoStepsByHandDecayOnlyOnMatrices) {
  const ModelConfig c = testing::micro_config("sps", 2);
  ParamTable table(c);
  OptimizerSettings settings;
  settings.weight_decay = 0.1;
  AdamW adamw(table, settings);
  std::vector<double> w(table.total(), 1.0), g(table.total(), 1.0);
  // gradient 1 · clip factor 0.5 = 0.5
  adamw.update(ops::cpu_backend<double>(), w.data(), g.data(), 0.1, 0.5);
  int decayed = 0, plain = 0;
  for (const auto& e : table.entries()) {
    EXPECT_EQ(e.decayed, e.shape.size() >= 2) << e.name;
    const double expected = e.decayed ? 0.890000002 : 0.900000002;
    for (int64_t k = 0; k < e.numel; ++k) ASSERT_NEAR(w[e.offset + k], expected, 1e-9) << e.name;
    (e.decayed ? decayed : plain)++;
  }
  EXPECT_GT(decayed, 0);
  EXPECT_GT(plain, 0);
  EXPECT_FLOAT_EQ(adamw.exp_avg()[0], 0.05f);
  EXPECT_FLOAT_EQ(adamw.exp_avg_sq()[0], 0.0125f);
  std::fill(g.begin(), g.end(), -0.25);
  adamw.update(ops::cpu_backend<double>(), w.data(), g.data(), 0.1, 1.0);
  EXPECT_EQ(adamw.step(), 2);
  for (const auto& e : table.entries()) {
    const double expected = e.decayed ? 0.8542630578558273 : 0.8731630578758274;
    ASSERT_NEAR(w[e.offset], expected, 1e-8) << e.name;
    ASSERT_NEAR(w[e.offset + e.numel - 1], expected, 1e-8) << e.name;
  }
  // The embedding (tied LM head) is decayed, norm gains are not.
  EXPECT_TRUE(table.find("transformer.wte.weight")->decayed);
  EXPECT_FALSE(table.find("transformer.output_norm.weight")->decayed);
}

TEST(AdamW, FloatMatchesDouble) {
  const ModelConfig c = testing::micro_config("sps", 2);
  ParamTable table(c);
  AdamW a(table, OptimizerSettings{}), b(table, OptimizerSettings{});
  std::vector<float> wf(table.total()), gf(table.total());
  std::vector<double> wd(table.total()), gd(table.total());
  for (int64_t i = 0; i < table.total(); ++i) {
    wd[i] = wf[i] = float(0.01 * double(i % 97) - 0.3);
    gd[i] = gf[i] = float(0.001 * double(i % 13) - 0.005);
  }
  for (int s = 0; s < 3; ++s) {
    a.update(ops::cpu_backend<float>(), wf.data(), gf.data(), 6e-4, 0.7);
    b.update(ops::cpu_backend<double>(), wd.data(), gd.data(), 6e-4, 0.7);
  }
  for (int64_t i = 0; i < table.total(); ++i) ASSERT_NEAR(wf[i], wd[i], 1e-6) << i;
}

TEST(SumSquares, SameBitsForAnyThreadCount) {
  std::vector<float> x(3 * (1 << 20) + 12345);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i)) * 1e-3);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = ops::sum_squares(x.data(), int64_t(x.size()));
  omp_set_num_threads(std::max(2, threads));
  const double many = ops::sum_squares(x.data(), int64_t(x.size()));
  omp_set_num_threads(threads);
  EXPECT_EQ(one, many);
  double reference = 0;
  for (float v : x) reference += double(v) * double(v);
  EXPECT_NEAR(one, reference, 1e-12 * reference);
}

TEST(AdamW, StateFileRoundTrip) {
  const ModelConfig c = testing::micro_config("sps", 2);
  ParamTable table(c);
  AdamW a(table, OptimizerSettings{});
  std::vector<float> w(table.total(), 0.5f), g(table.total());
  for (int64_t i = 0; i < table.total(); ++i) g[i] = float(i % 7) - 3.0f;
  a.update(ops::cpu_backend<float>(), w.data(), g.data(), 1e-3, 1.0);
  a.update(ops::cpu_backend<float>(), w.data(), g.data(), 1e-3, 1.0);
  testing::TempDir dir;
  a.save(dir.file("optimizer.safetensors"));
  AdamW b(table, OptimizerSettings{});
  b.load(dir.file("optimizer.safetensors"));
  EXPECT_EQ(b.step(), 2);
  const size_t n = size_t(table.total());
  EXPECT_EQ(std::vector<float>(a.exp_avg(), a.exp_avg() + n),
            std::vector<float>(b.exp_avg(), b.exp_avg() + n));
  EXPECT_EQ(std::vector<float>(a.exp_avg_sq(), a.exp_avg_sq() + n),
            std::vector<float>(b.exp_avg_sq(), b.exp_avg_sq() + n));
  // Another model's optimizer state is refused.
  ModelConfig other = c;
  other.n_layer = 1;
  ParamTable other_table(other);
  AdamW wrong(other_table, OptimizerSettings{});
  EXPECT_THROW(wrong.load(dir.file("optimizer.safetensors")), UserError);
}

}  // namespace
}  // namespace sps
