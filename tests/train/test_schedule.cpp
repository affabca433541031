// The learning-rate schedule of docs/model.md §6 at its boundaries, and gradient clipping.
#include <gtest/gtest.h>

#include "train/optimizer.h"

namespace sps {
namespace {

struct Schedule {
  OptimizerSettings optimizer;
  SchedulerSettings scheduler;
  int64_t tokens_per_step = 0, max_tokens = 0;
  double at(int64_t step) const {
    return scheduled_learning_rate(step, tokens_per_step, max_tokens, optimizer, scheduler);
  }
};

Schedule paper_20b() {  // scale s: 96 × 4096 tokens per step, warmup 50M, decay the last 2B
  Schedule s;
  s.optimizer.learning_rate = 6e-4;
  s.scheduler.min_lr = 6e-5;
  s.scheduler.warmup_tokens = 50000000;
  s.scheduler.lr_decay_tokens = 2000000000;
  s.tokens_per_step = 393216;
  s.max_tokens = 20000000000;
  return s;
}

TEST(LrSchedule, PaperRunBoundaries) {
  const Schedule s = paper_20b();
  // Step 0 counts as step 1: n = 393,216 for both.
  EXPECT_DOUBLE_EQ(s.at(0), 4.718592e-6);
  EXPECT_DOUBLE_EQ(s.at(1), 4.718592e-6);
  EXPECT_DOUBLE_EQ(s.at(2), 9.437184e-6);
  // Last warmup step: n = 49,938,432 < 50M; the next is past it.
  EXPECT_DOUBLE_EQ(s.at(127), 6e-4 * 49938432.0 / 5e7);
  EXPECT_DOUBLE_EQ(s.at(128), 6e-4);
  // Constant until n reaches 18B: step 45776 has n = 17,999,855,616.
  EXPECT_DOUBLE_EQ(s.at(45776), 6e-4);
  // Step 45777: n = 18,000,248,832, 248,832 tokens into the decay.
  EXPECT_DOUBLE_EQ(s.at(45777), 6e-5 + (1 - 248832.0 / 2e9) * 5.4e-4);
  EXPECT_NEAR(s.at(45777), 5.99932815360e-4, 1e-15);
  // The run's last step (50,862; n = 19,999,752,192) and the floor at and after max_tokens.
  EXPECT_NEAR(s.at(50862), 6.006690816e-5, 1e-16);
  EXPECT_DOUBLE_EQ(s.at(50863), 6e-5);
  EXPECT_DOUBLE_EQ(s.at(100000), 6e-5);
}

TEST(LrSchedule, ExactPhaseEdges) {
  Schedule s;
  s.optimizer.learning_rate = 1.0;
  s.scheduler.min_lr = 0.1;
  s.scheduler.warmup_tokens = 30;
  s.scheduler.lr_decay_tokens = 40;
  s.tokens_per_step = 10;
  s.max_tokens = 100;
  EXPECT_DOUBLE_EQ(s.at(0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.at(2), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);   // n = warmup: constant phase
  EXPECT_DOUBLE_EQ(s.at(5), 1.0);
  EXPECT_DOUBLE_EQ(s.at(6), 1.0);   // n = max − decay: decay starts at the peak
  EXPECT_DOUBLE_EQ(s.at(7), 0.1 + 0.75 * 0.9);
  EXPECT_DOUBLE_EQ(s.at(8), 0.55);
  EXPECT_DOUBLE_EQ(s.at(9), 0.1 + 0.25 * 0.9);
  EXPECT_DOUBLE_EQ(s.at(10), 0.1);  // n = max: min_lr
  EXPECT_DOUBLE_EQ(s.at(11), 0.1);
}

TEST(LrSchedule, NoWarmupNoDecayAndDecayOff) {
  Schedule s;
  s.optimizer.learning_rate = 2.0;
  s.scheduler.min_lr = 0.5;
  s.tokens_per_step = 10;
  s.max_tokens = 50;
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_DOUBLE_EQ(s.at(4), 2.0);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);  // n ≥ max
  s.scheduler.warmup_tokens = 40;
  s.scheduler.decay_lr = false;    // the peak throughout, as the paper's code does
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_DOUBLE_EQ(s.at(9), 2.0);
}

TEST(Clipping, CoefficientAsPyTorch) {
  EXPECT_DOUBLE_EQ(clip_coefficient(5.0, 1.0), 1.0 / (5.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_coefficient(1.0, 1.0), 1.0 / (1.0 + 1e-6));  // just below 1
  EXPECT_DOUBLE_EQ(clip_coefficient(1e9, 0.0), 1.0);  // clipping off
}

TEST(Clipping, GlobalNormOverTheWholeBuffer) {
  std::vector<float> g(100000, 0.0f);
  g[3] = 3.0f;
  g[99999] = 4.0f;
  EXPECT_DOUBLE_EQ(global_grad_norm(ops::cpu_backend<float>(), g.data(), int64_t(g.size())), 5.0);
  std::vector<double> d = {1.0, 2.0, 2.0};
  EXPECT_DOUBLE_EQ(global_grad_norm(ops::cpu_backend<double>(), d.data(), 3), 3.0);
}

}  // namespace
}  // namespace sps
