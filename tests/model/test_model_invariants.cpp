// Invariants of the model: left padding changes nothing, init is deterministic, weights
// survive a save/load, a planned step allocates nothing, and recomputing activations changes
// no bit of the loss or the gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "gradcheck.h"
#include "model/weights_io.h"
#include "model_fixtures.h"
#include "util/alloc_counter.h"
#include "util/error.h"
#include "util/safetensors.h"
#include "util/safetensors_edits.h"
#include "util/user_error.h"

namespace sps::testing {
namespace {

class ModelInvariants : public ::testing::TestWithParam<std::string> {};

// A row left-padded with PAD gives, at its real positions, the logits of the same tokens
// run alone without padding.
TEST_P(ModelInvariants, LeftPaddingLeavesRealRowsUnchanged) {
  const ModelConfig c = micro_config(GetParam(), 2);
  Model<double> model(c);
  randomize_weights(model, 3);
  const int64_t T = c.block_size, V = c.vocab_size, pad = 4, n = T - pad;
  const auto real = random_tokens(1, n, c, 21, {3});
  const auto targets = random_tokens(1, n, c, 22);
  std::vector<int32_t> x(T, c.pad_token_id), y(T, 0);
  std::copy(real.begin(), real.end(), x.begin() + pad);
  std::copy(targets.begin(), targets.end(), y.begin() + pad);

  std::vector<double> alone(n * V), padded(T * V);
  const StepResult r_alone = model.forward(real.data(), targets.data(), 1, n, {nullptr, alone.data()});
  const StepResult r_padded = model.forward(x.data(), y.data(), 1, T, {nullptr, padded.data()});
  EXPECT_LT(max_relative_error(padded.data() + pad * V, alone.data(), n * V), 1e-12);
  EXPECT_NEAR(r_alone.loss, r_padded.loss, 1e-12);
  EXPECT_EQ(r_alone.kept, r_padded.kept);
}

TEST_P(ModelInvariants, SaveLoadGivesIdenticalLoss) {
  const ModelConfig c = micro_config(GetParam(), 3);
  Model<float> model(c);
  randomize_weights(model, 8);
  const auto x = random_tokens(2, c.block_size, c, 1, {5});
  const auto y = random_tokens(2, c.block_size, c, 2);
  const double before = model.forward(x.data(), y.data(), 2, c.block_size).loss;
  const std::string path = ::testing::TempDir() + "/weights_" + GetParam() + ".safetensors";
  save_weights(path, model.params(), model.weights());
  Model<float> loaded(c);
  load_weights(path, loaded.params(), loaded.weights());
  EXPECT_EQ(loaded.forward(x.data(), y.data(), 2, c.block_size).loss, before);
  std::filesystem::remove(path);
}

// Weights read straight from a file and packed as they come (Model::load_for_inference, as
// the inference commands load) give the logits of the same weights packed in memory, bit for
// bit, in every weight type; the packed bytes shrink from f32 to bf16.
TEST_P(ModelInvariants, LoadingForInferenceEqualsPackingInMemory) {
  const ModelConfig c = micro_config(GetParam(), 3);
  Model<float> trained(c);
  randomize_weights(trained, 8);
  const std::string path = ::testing::TempDir() + "/packed_" + GetParam() + ".safetensors";
  save_weights(path, trained.params(), trained.weights());
  const auto x = random_tokens(2, c.block_size, c, 1, {5});
  int64_t previous_bytes = INT64_MAX;
  for (const ops::WeightType type :
       {ops::WeightType::f32, ops::WeightType::bf16, ops::WeightType::int8}) {
    Model<float> in_memory(c);
    randomize_weights(in_memory, 8);
    in_memory.pack_for_inference(type);
    Model<float> loaded(c, ops::cpu_backend<float>(), Model<float>::InitialWeights::unset);
    load_weights_for_inference(path, loaded, type);
    std::vector<double> expected(2 * c.block_size * c.vocab_size), got(expected.size());
    in_memory.forward(x.data(), x.data(), 2, c.block_size, {nullptr, expected.data()});
    loaded.forward(x.data(), x.data(), 2, c.block_size, {nullptr, got.data()});
    EXPECT_EQ(got, expected) << ops::weight_type_name(type);
    EXPECT_EQ(loaded.weight_type(), type);
    if (type != ops::WeightType::int8) {  // int8 pads in_dim to blocks of 32: more than bf16 here
      EXPECT_LT(loaded.weight_bytes(), previous_bytes) << ops::weight_type_name(type);
    }
    previous_bytes = loaded.weight_bytes();
  }
  std::filesystem::remove(path);
}

// Packing reads a projection a few panels at a time; its checksum is still verified, before
// the first part is used, whatever part the damage is in.
TEST(WeightsFileReader, ATensorReadInPartsIsVerifiedWhole) {
  const ModelConfig c = micro_config("sps", 3);
  Model<float> model(c);
  randomize_weights(model, 8);
  const std::string path = ::testing::TempDir() + "/parts.safetensors";
  save_weights(path, model.params(), model.weights());
  const ParamEntry& e = model.params().entries()[1];
  ASSERT_GE(e.numel, 4);
  flip_tensor_bit(path, e.name, 4 * (e.numel - 1), 3);  // in the tensor's last value
  const WeightsFileReader<float> reader(path, model.params());
  std::vector<float> part(size_t(e.numel / 2));
  std::string error;
  try {
    reader.read(e.offset, e.numel / 2, part.data());
  } catch (const UserError& caught) {
    error = caught.what();
  }
  EXPECT_EQ(error, path + ": tensor '" + e.name + "' does not match its checksum: the file is damaged");
  std::filesystem::remove(path);
}

TEST_P(ModelInvariants, PlannedStepAllocatesNothing) {
  if (allocation_count() < 0) GTEST_SKIP() << "allocation counting is off in this build";
  const ModelConfig c = micro_config(GetParam(), 2);
  Model<float> model(c);
  model.init_weights(1);
  const auto x = random_tokens(2, c.block_size, c, 1, {4});
  const auto y = random_tokens(2, c.block_size, c, 2);
  model.forward_backward(x.data(), y.data(), 2, c.block_size);
  const int64_t before = allocation_count();
  model.forward_backward(x.data(), y.data(), 2, c.block_size);
  model.forward(x.data(), y.data(), 1, c.block_size);  // a smaller batch reuses the plan
  EXPECT_EQ(allocation_count() - before, 0);
}

// Recomputation runs the same ops on the same inputs in the same order, so the loss and every
// gradient are bit-identical, in less activation memory (the micro model has 3 layers).
TEST_P(ModelInvariants, RecomputeIsBitIdenticalInLessMemory) {
  ModelConfig c = micro_config(GetParam(), 3);
  c.n_layer = 3;
  const auto x = random_tokens(2, c.block_size, c, 5, {6});
  const auto y = random_tokens(2, c.block_size, c, 6);
  Model<float> stored(c), recomputed(c);
  randomize_weights(stored, 9);
  randomize_weights(recomputed, 9);
  recomputed.set_recompute(true);
  const StepResult a = stored.forward_backward(x.data(), y.data(), 2, c.block_size);
  const StepResult b = recomputed.forward_backward(x.data(), y.data(), 2, c.block_size);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.attention_pairs, b.attention_pairs);
  const size_t n = stored.params().total();
  EXPECT_EQ(std::memcmp(stored.grads(), recomputed.grads(), n * sizeof(float)), 0);
  // Saved: at least the q|k|v, gate|up and SwiGLU rows of all blocks but one.
  const int64_t rows = 2 * family_by_name(c.family).streams() * c.block_size;
  const int64_t per_block = rows * (3 * c.hidden_size + 3 * c.intermediate_size) * 4;
  EXPECT_GE(stored.activation_bytes() - recomputed.activation_bytes(),
            (c.n_layer - 1) * per_block);
  EXPECT_EQ(stored.activation_bytes(), planned_activation_bytes(c, 2, c.block_size, ActivationPlanKind::training));
  EXPECT_EQ(recomputed.activation_bytes(), planned_activation_bytes(c, 2, c.block_size,
                                                                ActivationPlanKind::training_recomputed));
  // A second step on the recomputing model's plan: same gradients again (accumulated twice).
  stored.forward_backward(x.data(), y.data(), 2, c.block_size);
  recomputed.forward_backward(x.data(), y.data(), 2, c.block_size);
  EXPECT_EQ(std::memcmp(stored.grads(), recomputed.grads(), n * sizeof(float)), 0);
}

// The backward says which gradients are done as it goes: each block's first offset, from the
// last block back, then 0; nothing at or after a reported offset changes afterwards (a data-
// parallel step sums them while the backward goes on), recomputing or not.
TEST_P(ModelInvariants, GradientsReportedDoneDoNotChangeAfterwards) {
  ModelConfig c = micro_config(GetParam(), 3);
  c.n_layer = 3;
  const auto x = random_tokens(2, c.block_size, c, 5, {6});
  const auto y = random_tokens(2, c.block_size, c, 6);
  for (const bool recompute : {false, true}) {
    Model<float> model(c);
    randomize_weights(model, 9);
    model.set_recompute(recompute);
    model.forward_backward(x.data(), y.data(), 2, c.block_size);  // gradients to accumulate on
    const int64_t n = model.params().total();
    std::vector<int64_t> offsets;
    std::vector<std::vector<float>> snapshots;
    BackwardOptions<float> options;
    options.gradients_done_from = [&](int64_t offset) {
      offsets.push_back(offset);
      snapshots.emplace_back(model.grads() + offset, model.grads() + n);
    };
    model.forward_backward(x.data(), y.data(), 2, c.block_size, 1.0, options);
    const std::vector<int64_t> expected = {model.params().layer(2).attention_norm,
                                           model.params().layer(1).attention_norm,
                                           model.params().layer(0).attention_norm, 0};
    EXPECT_EQ(offsets, expected);
    for (size_t k = 0; k < offsets.size(); ++k)
      EXPECT_EQ(snapshots[k], std::vector<float>(model.grads() + offsets[k], model.grads() + n))
          << "gradients from offset " << offsets[k] << " changed after the backward said done";
  }
}

// A forward-only model plans for inference: one residual buffer and one block's activations
// shared by all blocks, no gradients. Its losses, NLL and logits are the training plan's bits,
// and a later backward moves it to a training plan with the gradients of a fresh model.
TEST_P(ModelInvariants, InferencePlanIsBitIdenticalInLessMemory) {
  for (const int64_t layers : {2, 3}) {
    ModelConfig c = micro_config(GetParam(), 3);
    c.n_layer = layers;
    const auto x = random_tokens(2, c.block_size, c, 5, {6});
    const auto y = random_tokens(2, c.block_size, c, 6);
    Model<float> inference(c), training(c), fresh(c);
    for (Model<float>* m : {&inference, &training, &fresh}) randomize_weights(*m, 9);
    training.forward_backward(x.data(), y.data(), 2, c.block_size);
    const int64_t n = 2 * c.block_size;
    std::vector<double> nll_a(n), nll_b(n), logits_a(n * c.vocab_size), logits_b(n * c.vocab_size);
    const StepResult a =
        inference.forward(x.data(), y.data(), 2, c.block_size, {nll_a.data(), logits_a.data()});
    const StepResult b =
        training.forward(x.data(), y.data(), 2, c.block_size, {nll_b.data(), logits_b.data()});
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(nll_a, nll_b);
    EXPECT_EQ(logits_a, logits_b);
    EXPECT_EQ(std::as_const(inference).grads(), nullptr);
    EXPECT_EQ(inference.activation_bytes(),
              planned_activation_bytes(c, 2, c.block_size, ActivationPlanKind::inference));
    // Saved: at least the q|k|v, gate|up and SwiGLU rows of all blocks but one.
    const int64_t rows = 2 * family_by_name(c.family).streams() * c.block_size;
    const int64_t per_block = rows * (3 * c.hidden_size + 3 * c.intermediate_size) * 4;
    EXPECT_GE(training.activation_bytes() - inference.activation_bytes(),
              (c.n_layer - 1) * per_block);
    inference.forward_backward(x.data(), y.data(), 2, c.block_size);
    fresh.forward_backward(x.data(), y.data(), 2, c.block_size);
    EXPECT_EQ(inference.activation_bytes(), fresh.activation_bytes());
    const size_t p = size_t(c.parameter_count());
    EXPECT_EQ(std::memcmp(inference.grads(), fresh.grads(), p * sizeof(float)), 0);
  }
}

// Float logits into a caller's buffer (written there in place on the CPU): the LM head's own
// values, the double logits' as computed, with the same loss; packed weights too.
TEST_P(ModelInvariants, FloatLogitsAreTheLmHeadsValues) {
  const ModelConfig c = micro_config(GetParam(), 3);
  const int64_t B = 2, T = c.block_size, V = c.vocab_size, n = B * T * V;
  const auto x = random_tokens(B, T, c, 7, {5});
  const auto y = random_tokens(B, T, c, 8);
  Model<float> model(c);
  randomize_weights(model, 10);
  for (const bool packed : {false, true}) {
    if (packed) model.pack_for_inference();
    std::vector<double> logits(n);
    const StepResult want = model.forward(x.data(), y.data(), B, T, {nullptr, logits.data()});
    std::vector<float> got(n, NAN), both(n, NAN);
    std::vector<double> again(n);
    ForwardOptions options;
    options.float_logits = got.data();
    EXPECT_EQ(model.forward(x.data(), y.data(), B, T, options).loss, want.loss);
    options.float_logits = both.data();
    options.logits = again.data();
    model.forward(x.data(), y.data(), B, T, options);
    EXPECT_EQ(got, both);
    EXPECT_EQ(again, logits);
    for (int64_t k = 0; k < n; ++k)
      ASSERT_EQ(double(got[k]), logits[k]) << k << (packed ? " packed" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ModelInvariants, ::testing::ValuesIn(model_families()),
                         [](const auto& info) { return info.param; });

// The logits buffer holds one LM-head chunk: 256 rows on the CPU, 4,096 on a GPU, never
// more rows than the micro-batch reads out.
TEST(ActivationPlan, TheLogitsChunkFollowsTheDevice) {
  const ModelConfig c = micro_config("sps", 3);
  const ops::Device cpu, gpu{"cuda", 0};
  const int64_t V = c.vocab_size, logits = sizeof(float) * V;
  const auto bytes = [&](int64_t batch, const ops::Device& device) {
    return planned_activation_bytes(c, batch, c.block_size, ActivationPlanKind::training, device);
  };
  const int64_t few = 4, many = 64;             // 48 and 768 readout rows of 12 tokens
  EXPECT_EQ(bytes(few, gpu), bytes(few, cpu));  // both chunks hold every row
  EXPECT_EQ(bytes(many, gpu) - bytes(many, cpu), (many * c.block_size - 256) * logits);
}

TEST(ModelInit, SameSeedIsBitIdenticalAndFollowsSpec) {
  ModelConfig c = micro_config("sps", 2);
  c.init_std = 0.02;
  c.hidden_size = 64;
  c.intermediate_size = 192;
  Model<float> a(c), b(c), other(c);
  a.init_weights(42);
  b.init_weights(42);
  other.init_weights(43);
  const int64_t n = a.params().total();
  EXPECT_EQ(std::memcmp(a.weights(), b.weights(), n * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(a.weights(), other.weights(), n * sizeof(float)), 0);
  auto stddev = [&](const std::string& name) {
    const ParamEntry* e = a.params().find(name);
    double s = 0;
    for (int64_t k = 0; k < e->numel; ++k) s += double(a.weights()[e->offset + k]) * a.weights()[e->offset + k];
    return std::sqrt(s / double(e->numel));
  };
  EXPECT_NEAR(stddev("transformer.wte.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("transformer.h.0.mlp.down_proj.weight"), 0.02, 0.001);  // not rescaled
  EXPECT_NEAR(stddev("transformer.h.1.attn.c_proj.weight"), 0.02 / std::sqrt(4.0), 0.0008);
  const ParamEntry* gain = a.params().find("transformer.h.1.mlp_norm.weight");
  for (int64_t k = 0; k < gain->numel; ++k) EXPECT_EQ(a.weights()[gain->offset + k], 1.0f);
}

// A NaN or Inf weight is refused at load, naming the tensor and the index.
TEST(WeightsIo, RejectsNonFiniteWeights) {
  const ModelConfig c = micro_config("sps", 2);
  const std::string path = ::testing::TempDir() + "/nonfinite.safetensors";
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    Model<float> model(c);
    model.init_weights(1);
    const ParamEntry* e = model.params().find("transformer.h.1.attn.c_proj.weight");
    model.weights()[e->offset + 5] = bad;
    save_weights(path, model.params(), model.weights());
    Model<float> loaded(c);
    try {
      load_weights(path, loaded.params(), loaded.weights());
      ADD_FAILURE() << "loaded " << bad;
    } catch (const UserError& error) {
      EXPECT_EQ(std::string(error.what()),
                fmt::format("{}: tensor 'transformer.h.1.attn.c_proj.weight' holds a non-finite value "
                            "({}) at index 5",
                            path, double(bad)));
    }
  }
}

// An F64 weight beyond float's range would load as Inf: refused like one.
TEST(WeightsIo, RejectsF64WeightsBeyondFloat) {
  const ModelConfig c = micro_config("sps", 2);
  const std::string path = ::testing::TempDir() + "/huge.safetensors";
  Model<double> wide(c);
  wide.init_weights(1);
  const ParamEntry* e = wide.params().find("transformer.h.0.attn.c_attn.weight");
  wide.weights()[e->offset + 3] = 1e300;
  std::vector<TensorToWrite> tensors;
  for (const auto& entry : wide.params().entries())
    tensors.push_back({entry.name, DType::F64, entry.shape, wide.weights() + entry.offset});
  write_safetensors(path, tensors, {{"format", "sps"}});
  Model<float> loaded(c);
  const std::string error =
      testing::error_of([&] { load_weights(path, loaded.params(), loaded.weights()); });
  EXPECT_EQ(error, fmt::format("{}: tensor 'transformer.h.0.attn.c_attn.weight' holds a "
                               "non-finite value (inf) at index 3",
                               path));
  Model<double> reloaded(c);  // in double it is a number
  load_weights(path, reloaded.params(), reloaded.weights());
  EXPECT_EQ(reloaded.weights()[e->offset + 3], 1e300);
}

// Damaged or mismatched weight files: one clear UserError, never a crash.
TEST(WeightsIo, RejectsMismatchedFiles) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  model.init_weights(1);
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/good.safetensors";
  save_weights(good, model.params(), model.weights());

  ModelConfig wider = c;
  wider.intermediate_size = 32;
  Model<float> other(wider);
  EXPECT_THROW(load_weights(good, other.params(), other.weights()), UserError);  // shapes
  ModelConfig deeper = c;
  deeper.n_layer = 3;
  Model<float> deep(deeper);
  EXPECT_THROW(load_weights(good, deep.params(), deep.weights()), UserError);  // missing
  ModelConfig shallower = c;
  shallower.n_layer = 1;
  Model<float> shallow(shallower);
  EXPECT_THROW(load_weights(good, shallow.params(), shallow.weights()), UserError);  // extra

  const auto size = std::filesystem::file_size(good);
  const std::string truncated = dir + "/truncated.safetensors";
  std::filesystem::copy_file(good, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, size - 10);
  EXPECT_THROW(load_weights(truncated, model.params(), model.weights()), UserError);
  EXPECT_THROW(load_weights(dir + "/absent.safetensors", model.params(), model.weights()),
               UserError);
  std::filesystem::remove(good);
  std::filesystem::remove(truncated);
}

}  // namespace
}  // namespace sps::testing
