// A model on the CPU backend of bf16 precision (ops.h Precision::bf16): its step is the fp32
// step within bf16's tolerance and not equal to it, for every family; its GEMMs read copies of
// the weights made once per change, never stale after any write through weights() (an
// optimizer update, a load, an init); a planned step allocates nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "model_fixtures.h"
#include "ops/backend.h"
#include "util/alloc_counter.h"

namespace sps::testing {
namespace {

const ops::Backend<float>& bf16_cpu() { return ops::cpu_backend(ops::Precision::bf16); }

// The weight matrices the GEMMs read: four per block and the tied embedding (the LM head).
int64_t weight_matrices(const ModelConfig& c) { return 4 * c.n_layer + 1; }

double norm(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return std::sqrt(s);
}

class ModelBf16 : public ::testing::TestWithParam<std::string> {};

// The stated tolerance: bf16 keeps 8 significant bits (relative rounding 2⁻⁹ ≈ 0.2% per
// operand), and the micro model's large random weights (init_std 0.3) amplify it through two
// blocks; the loss within 1% and the whole gradient within 5% (relative L2), measured at a
// few times less. Different at all: the step is not fp32's.
TEST_P(ModelBf16, StepIsTheFp32StepWithinBf16Tolerance) {
  const ModelConfig c = micro_config(GetParam(), 3);
  Model<float> fp32(c), bf16(c, bf16_cpu());
  randomize_weights(fp32, 11);
  randomize_weights(bf16, 11);
  ASSERT_EQ(std::memcmp(fp32.weights(), bf16.weights(), sizeof(float) * c.parameter_count()), 0);
  const auto x = random_tokens(2, c.block_size, c, 1, {5});
  const auto y = random_tokens(2, c.block_size, c, 2);
  const StepResult a = fp32.forward_backward(x.data(), y.data(), 2, c.block_size);
  const StepResult b = bf16.forward_backward(x.data(), y.data(), 2, c.block_size);
  EXPECT_NEAR(b.loss, a.loss, 1e-2 * a.loss);
  EXPECT_NE(b.loss, a.loss);
  EXPECT_EQ(b.kept, a.kept);
  EXPECT_EQ(b.attention_pairs, a.attention_pairs);
  const int64_t P = c.parameter_count();
  std::vector<float> difference(P);
  for (int64_t i = 0; i < P; ++i) difference[i] = bf16.grads()[i] - fp32.grads()[i];
  const double relative = norm(difference.data(), P) / norm(fp32.grads(), P);
  EXPECT_LT(relative, 0.1);
  EXPECT_GT(relative, 0);
}

// Every write through weights() reaches the next GEMM: the bf16 model gives, bit for bit, what
// a fresh bf16 model holding the same weights gives; and between writes the copies are made
// once, however many forwards and backwards read them.
TEST_P(ModelBf16, WeightCopiesAreRemadeAfterEveryWriteAndOnlyThen) {
  const ModelConfig c = micro_config(GetParam(), 3);
  const int64_t P = c.parameter_count(), matrices = weight_matrices(c);
  const auto x = random_tokens(2, c.block_size, c, 3, {4});
  const auto y = random_tokens(2, c.block_size, c, 4);
  Model<float> model(c, bf16_cpu());
  EXPECT_EQ(model.gemm_weight_conversions(), 0);
  model.forward(x.data(), y.data(), 2, c.block_size);  // all-zero weights, converted
  randomize_weights(model, 5);                         // init, then writes element by element

  // What a fresh model with the current weights computes.
  const auto fresh = [&](StepResult* result, std::vector<float>* grads) {
    Model<float> other(c, bf16_cpu());
    std::memcpy(other.weights(), std::as_const(model).weights(), sizeof(float) * P);
    *result = other.forward_backward(x.data(), y.data(), 2, c.block_size);
    grads->assign(other.grads(), other.grads() + P);
  };
  const auto expect_fresh = [&](const char* after) {
    SCOPED_TRACE(after);
    model.zero_grads();
    const StepResult ours = model.forward_backward(x.data(), y.data(), 2, c.block_size);
    StepResult theirs;
    std::vector<float> grads;
    fresh(&theirs, &grads);
    EXPECT_EQ(ours.loss, theirs.loss);
    EXPECT_EQ(std::memcmp(model.grads(), grads.data(), sizeof(float) * P), 0);
  };

  const int64_t before = model.gemm_weight_conversions();
  expect_fresh("init and writes");
  const int64_t per_change = model.gemm_weight_conversions() - before;
  EXPECT_GE(per_change, matrices);  // each matrix once (twice on oneDNN: two layouts)
  EXPECT_LE(per_change, 2 * matrices);
  // More micro-batches on unchanged weights convert nothing.
  model.forward_backward(x.data(), y.data(), 2, c.block_size);
  model.forward(x.data(), y.data(), 1, c.block_size);
  EXPECT_EQ(model.gemm_weight_conversions(), before + per_change);

  // An update as the optimizer makes it: a pointer from weights(), written after the forward.
  float* W = model.weights();
  for (int64_t i = 0; i < P; i += 7) W[i] -= 0.05f * std::as_const(model).grads()[i];
  expect_fresh("an update");
  EXPECT_EQ(model.gemm_weight_conversions(), before + 2 * per_change);
  // One weight of the tied table alone (the LM head's GEMMs read it).
  model.weights()[model.params().wte() + 3] += 0.5f;
  expect_fresh("one embedding weight");
  // A new init.
  model.init_weights(99);
  expect_fresh("init_weights");
}

TEST_P(ModelBf16, PlannedStepAllocatesNothing) {
  if (allocation_count() < 0) GTEST_SKIP() << "allocation counting is off in this build";
  const ModelConfig c = micro_config(GetParam(), 2);
  Model<float> model(c, bf16_cpu());
  model.init_weights(1);
  const auto x = random_tokens(2, c.block_size, c, 1, {4});
  const auto y = random_tokens(2, c.block_size, c, 2);
  model.forward_backward(x.data(), y.data(), 2, c.block_size);
  model.forward(x.data(), y.data(), 1, c.block_size);  // oneDNN makes a primitive per shape
  model.weights();  // changed: the next step converts into the copies it has
  const int64_t before = allocation_count();
  model.forward_backward(x.data(), y.data(), 2, c.block_size);
  model.forward(x.data(), y.data(), 1, c.block_size);
  EXPECT_EQ(allocation_count() - before, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, ModelBf16, ::testing::ValuesIn(model_families()));

// fp32 keeps no copies: its GEMMs read the weights themselves.
TEST(ModelFp32, ConvertsNoWeights) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  model.init_weights(1);
  const auto x = random_tokens(1, c.block_size, c, 1);
  model.forward_backward(x.data(), x.data(), 1, c.block_size);
  EXPECT_EQ(model.gemm_weight_conversions(), 0);
}

}  // namespace
}  // namespace sps::testing
