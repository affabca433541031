// Cached generation equals the training forward: for every family, window and ω, the logits
// of prefill plus step-by-step decode (or extends of several tokens) are the logits the
// training forward computes on the same tokens, with an EOS inside the prompt and one fed
// during decode (the caches reset; the training forward's document rule gives the same
// thing), for left-padded batches too.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "model/decode_against_forward.h"
#include "model/decoder.h"
#include "model/model_fixtures.h"
#include "util/alloc_counter.h"
#include "util/float_formats.h"

namespace sps::testing {
namespace {

struct Case {
  std::string family;
  int64_t window, omega;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.family << " w=" << c.window << " omega=" << c.omega;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.family + "_w" + std::to_string(info.param.window) +
         (info.param.omega >= 0 ? "_omega" + std::to_string(info.param.omega) : "");
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string& f : model_families())
    for (int64_t w : {0, 1, 3, 20}) cases.push_back({f, w, -1});
  for (const std::string& f : model_families()) cases.push_back({f, 3, 2});
  return cases;
}

class DecoderEqualsForward : public ::testing::TestWithParam<Case> {};

// T = 12 tokens: an EOS inside the prompt (position 2), one fed during decode (position 7).
template <typename T>
void single_sequence(const Case& p) {
  const ModelConfig c = micro_config(p.family, p.window, p.omega);
  Model<T> model(c);
  randomize_weights(model, 5);
  const auto x = random_tokens(1, c.block_size, c, 17, {2, 7});
  check_against_forward(model, {x}, {5});
  check_against_forward(model, {x}, {1});   // prompt of one token
  check_against_forward(model, {x}, {3});   // prompt ending in EOS
  check_against_forward(model, {x}, {12});  // prefill only
  for (int64_t chunk : {2, 3, 5, 12}) {       // extends, the ring wrapping between them
    check_against_forward(model, {x}, {5}, 0, chunk);
    check_against_forward(model, {x}, {1}, 0, chunk);
    check_against_forward(model, {x}, {3}, 0, chunk);
  }
}

TEST_P(DecoderEqualsForward, Float) { single_sequence<float>(GetParam()); }
TEST_P(DecoderEqualsForward, Double) { single_sequence<double>(GetParam()); }

// Three rows of different prompt lengths, left-padded, EOS at different places; prefill in
// one forward and in forwards of one row give the same.
TEST_P(DecoderEqualsForward, LeftPaddedBatch) {
  const Case& p = GetParam();
  const ModelConfig c = micro_config(p.family, p.window, p.omega);
  Model<float> model(c);
  randomize_weights(model, 6);
  auto a = random_tokens(1, 12, c, 31, {4, 9});
  auto b = random_tokens(1, 10, c, 32, {1});
  auto d = random_tokens(1, 11, c, 33, {6});
  check_against_forward(model, {a, b, d}, {6, 2, 8});
  check_against_forward(model, {a, b, d}, {6, 2, 8}, 1);
  check_against_forward(model, {a, b, d}, {6, 2, 8}, 0, 4);
}

// Extends of many tokens run the decode attention as query tiles (K·Q ≥ 16 rows, more than
// one tile of 64 at K = 40 with two streams): T = 100, windows below, inside and above the
// chunk, ω, one row and a left-padded pair.
TEST_P(DecoderEqualsForward, LongExtends) {
  const Case& p = GetParam();
  ModelConfig c = micro_config(p.family, p.window == 20 ? 50 : p.window, p.omega);
  c.block_size = 100;
  Model<float> model(c);
  randomize_weights(model, 7);
  const auto x = random_tokens(1, 100, c, 41, {60});
  const auto y = random_tokens(1, 90, c, 42, {});
  for (int64_t chunk : {16, 40, 99}) {
    check_against_forward(model, {x}, {1}, 0, chunk);
    check_against_forward(model, {x, y}, {30, 7}, 0, chunk);
  }
}

// The projections of `model` (and the tied table) as the weight type stores them: bf16-rounded
// or Q8_0-dequantized, through the library's conversions (tests/ops checks those against
// independent references).
void round_projections(Model<float>& model, ops::WeightType type) {
  if (type == ops::WeightType::f32) return;
  const ModelConfig& c = model.config();
  const int64_t d = c.hidden_size, F = c.intermediate_size;
  struct Weight {
    int64_t offset, in_dim, out_dim;
  };
  std::vector<Weight> weights = {{model.params().wte(), d, c.vocab_size}};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerParams& p = model.params().layer(l);
    weights.insert(weights.end(),
                   {{p.c_attn, d, 3 * d}, {p.c_proj, d, d}, {p.gate_up, d, 2 * F}, {p.down_proj, F, d}});
  }
  for (const Weight& weight : weights)
    for (int64_t r = 0; r < weight.out_dim; ++r)
      for (int64_t k0 = 0; k0 < weight.in_dim; k0 += ops::kQ8Block) {
        float* x = model.weights() + weight.offset + r * weight.in_dim + k0;
        const int64_t m = std::min(ops::kQ8Block, weight.in_dim - k0);
        if (type == ops::WeightType::bf16) {
          for (int64_t i = 0; i < m; ++i) x[i] = round_to_bf16(x[i]);
        } else {
          int8_t q[ops::kQ8Block];
          const float scale = f16_to_float(ops::quantize_q8_block(x, m, q, "test"));
          for (int64_t i = 0; i < m; ++i) x[i] = float(q[i]) * scale;
        }
      }
}

// Weights packed for inference in each weight type (Model::pack_for_inference): the forward's
// logits are those of the row layout on the rounded weights (int8: close to them), and cached
// generation equals the forward with both on the packed weights, bit for bit.
TEST_P(DecoderEqualsForward, PackedWeights) {
  const Case& p = GetParam();
  const ModelConfig c = micro_config(p.family, p.window, p.omega);
  for (const ops::WeightType type :
       {ops::WeightType::f32, ops::WeightType::bf16, ops::WeightType::int8}) {
    SCOPED_TRACE(ops::weight_type_name(type));
    Model<float> rows_model(c), model(c);
    randomize_weights(rows_model, 8);
    round_projections(rows_model, type);
    randomize_weights(model, 8);
    model.pack_for_inference(type);
    ASSERT_TRUE(model.packed());
    const int64_t n = c.block_size, V = c.vocab_size;
    const auto x = random_tokens(1, n, c, 19, {2, 7});
    std::vector<double> row_logits(n * V), packed_logits(n * V);
    rows_model.forward(x.data(), x.data(), 1, n, {nullptr, row_logits.data()});
    model.forward(x.data(), x.data(), 1, n, {nullptr, packed_logits.data()});
    // bf16 rounds each linear's input rows too and int8 quantizes them (ops/weight_type.h):
    // a percent or a few apart.
    EXPECT_LT(max_relative_error(packed_logits.data(), row_logits.data(), n * V),
              type == ops::WeightType::int8   ? 0.05
              : type == ops::WeightType::bf16 ? 0.02
                                              : 1e-4);
    check_against_forward(model, {x}, {5});
    check_against_forward(model, {x}, {3}, 0, 5);
    const auto b = random_tokens(1, 10, c, 32, {1});
    check_against_forward(model, {x, b}, {6, 2});
  }
}

// A bf16 KV cache: only the cached K and V are rounded, so the logits of cached decoding stay
// within bf16's rounding of the forward's, in steps, extends, extends long enough to run as
// query tiles, and a left-padded batch.
TEST_P(DecoderEqualsForward, Bf16KvCache) {
  const Case& p = GetParam();
  const ModelConfig c = micro_config(p.family, p.window, p.omega);
  Model<float> model(c);
  randomize_weights(model, 5);
  model.set_kv_type(KvType::bf16);
  constexpr double kBf16Tolerance = 0.05;  // as int8 weights: 2.4% at most here
  const auto x = random_tokens(1, c.block_size, c, 17, {2, 7});
  check_against_forward(model, {x}, {5}, 0, 1, kBf16Tolerance);
  check_against_forward(model, {x}, {3}, 0, 5, kBf16Tolerance);
  check_against_forward(model, {x}, {1}, 0, 11, kBf16Tolerance);
  const auto b = random_tokens(1, 10, c, 32, {1});
  check_against_forward(model, {x, b}, {6, 2}, 0, 1, kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderEqualsForward, ::testing::ValuesIn(all_cases()), case_name);

// An extend of the first rows only: their logits are the forward's, and the other rows keep
// their state (a later step of all rows continues each from where it stands).
TEST(Decoder, ExtendOfTheFirstRows) {
  const ModelConfig c = micro_config("sps", 3);
  Model<float> model(c);
  randomize_weights(model, 8);
  const int64_t V = c.vocab_size, B = 3, P = 4, K = 5;
  const auto x = random_tokens(B, 12, c, 51, {});
  std::vector<std::vector<double>> expected(B, std::vector<double>(12 * V));
  for (int64_t b = 0; b < B; ++b)
    model.forward(x.data() + b * 12, x.data() + b * 12, 1, 12, {nullptr, expected[b].data()});
  DecoderShape shape;
  shape.batch = B;
  shape.max_prompt_tokens = P;
  shape.max_new_tokens = K + 1;
  shape.max_chunk_tokens = K;
  Decoder<float> decoder(model, shape);
  std::vector<int32_t> prompts(B * P);
  for (int64_t b = 0; b < B; ++b) std::copy_n(x.begin() + b * 12, P, prompts.begin() + b * P);
  decoder.prefill(prompts.data(), P);
  std::vector<int32_t> feed(2 * K);
  for (int64_t b = 0; b < 2; ++b) std::copy_n(x.begin() + b * 12 + P, K, feed.begin() + b * K);
  decoder.extend(feed.data(), K, 2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < K; ++t)
      EXPECT_LT(max_relative_error(decoder.logits() + (b * K + t) * V, expected[b].data() + (P + t) * V, V), 1e-4)
          << "row " << b << " token " << t;
  EXPECT_EQ(decoder.next_position(2), P);
  const std::vector<int32_t> next = {x[P + K], x[12 + P + K], x[2 * 12 + P]};
  decoder.step(next.data());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t position = b < 2 ? P + K : P;
    EXPECT_LT(max_relative_error(decoder.logits() + b * V, expected[b].data() + position * V, V), 1e-4)
        << "row " << b;
  }
}

// After a consumed EOS the row's cache holds only the new document; positions go on.
TEST(Decoder, DocumentResetAfterConsumedEos) {
  const ModelConfig c = micro_config("sps", 2);
  Model<float> model(c);
  randomize_weights(model, 2);
  DecoderShape shape;
  shape.batch = 2;
  shape.max_prompt_tokens = 4;
  shape.max_new_tokens = 5;
  Decoder<float> decoder(model, shape);
  const std::vector<int32_t> prompts = {1, 2, 3, 4, c.pad_token_id, 5, c.eos_token_id, 6};
  decoder.prefill(prompts.data(), 4);
  EXPECT_EQ(decoder.cache().persistent_length(0), 4);
  EXPECT_EQ(decoder.cache().ring_length(0), 2);
  EXPECT_EQ(decoder.cache().persistent_length(1), 1);  // the document after the EOS
  EXPECT_EQ(decoder.cache().ring_length(1), 1);
  EXPECT_EQ(decoder.next_position(1), 3);
  const std::vector<int32_t> eos_first = {c.eos_token_id, 7};
  decoder.step(eos_first.data());
  EXPECT_EQ(decoder.cache().persistent_length(0), 5);  // the EOS belongs to its document
  EXPECT_EQ(decoder.cache().ring_length(0), 2);
  const std::vector<int32_t> after = {8, 9};
  decoder.step(after.data());
  EXPECT_EQ(decoder.cache().persistent_length(0), 1);
  EXPECT_EQ(decoder.cache().ring_length(0), 1);
  EXPECT_EQ(decoder.next_position(0), 6);  // positions never reset
  EXPECT_EQ(decoder.cache().persistent_length(1), 3);
}

// Cost follows the rows cached, not the capacity; a decode step allocates nothing.
TEST(Decoder, StepCostFollowsCachedLengthAndAllocatesNothing) {
  const ModelConfig c = micro_config("sps", 3);
  Model<float> model(c);
  randomize_weights(model, 4);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  auto pairs_after_two_steps = [&](int64_t max_new) {
    DecoderShape shape;
    shape.max_prompt_tokens = 5;
    shape.max_new_tokens = max_new;
    Decoder<float> decoder(model, shape);
    decoder.prefill(prompt.data(), 5);
    const int32_t token = 6;
    decoder.step(&token);
    const int64_t before = allocation_count();
    decoder.step(&token);
    if (before >= 0) {
      EXPECT_EQ(allocation_count() - before, 0);
    }
    return decoder.last_step_attention_pairs();
  };
  for (const KvType type : {KvType::f32, KvType::bf16}) {
    SCOPED_TRACE(kv_type_name(type));
    model.set_kv_type(type);
    const int64_t small = pairs_after_two_steps(2), large = pairs_after_two_steps(500);
    EXPECT_EQ(small, large);
    // L · H · (2 queries · (6 persistent + 3 ring) + 1 + 2 own keys)
    EXPECT_EQ(small, c.n_layer * c.n_head * (2 * (6 + 3) + 3));
  }
}

// Positions past block_size run on (RoPE tables cover the capacity); the first steps still
// match the forward.
TEST(Decoder, RunsPastBlockSize) {
  const ModelConfig c = micro_config("standard", 0);
  Model<float> model(c);
  randomize_weights(model, 9);
  DecoderShape shape;
  shape.max_prompt_tokens = 12;
  shape.max_new_tokens = 30;
  Decoder<float> decoder(model, shape);
  const auto x = random_tokens(1, 12, c, 3);
  decoder.prefill(x.data(), 12);
  for (int k = 0; k < 30; ++k) {
    const int32_t token = int32_t(k % 50);
    decoder.step(&token);
  }
  EXPECT_EQ(decoder.next_position(0), 42);
  for (int64_t v = 0; v < c.vocab_size; ++v) EXPECT_TRUE(std::isfinite(decoder.logits()[v]));
}

// The RoPE tables start with the prompts and 4,096 new positions (a long max_new_tokens costs
// nothing up front) and grow as decoding passes them: the logits after the growth equal those
// of the forward of another model with the same weights (whose tables the forward fills).
TEST(Decoder, RopeTablesGrowAsPositionsCome) {
  for (const std::string family : {"standard", "sps"}) {
    ModelConfig c = micro_config(family, 3);
    constexpr int64_t P = 5, T = 4200, kCheckedFrom = 4090;
    c.block_size = T;
    Model<float> model(c), reference(c);
    randomize_weights(model, 7);
    std::copy_n(model.weights(), model.params().total(), reference.weights());
    const auto x = random_tokens(1, T, c, 41);
    std::vector<double> expected(size_t(T * c.vocab_size));
    reference.forward(x.data(), x.data(), 1, T, {nullptr, expected.data()});

    DecoderShape shape;
    shape.max_prompt_tokens = P;
    shape.max_new_tokens = 1'000'000;
    shape.max_chunk_tokens = 128;  // extends of 128 tokens: few calls
    Decoder<float> decoder(model, shape);
    EXPECT_EQ(model.rope_positions(), P + 4096) << family;
    decoder.prefill(x.data(), P);
    for (int64_t from = P; from < T; from += 128) {
      const int64_t K = std::min<int64_t>(128, T - from);
      decoder.extend(&x[size_t(from)], K);
      for (int64_t t = 0; t < K; ++t)
        if (from + t >= kCheckedFrom)
          EXPECT_LT(max_relative_error(decoder.logits() + t * c.vocab_size,
                                       expected.data() + (from + t) * c.vocab_size, c.vocab_size),
                    DecodeTolerance<float>::value)
              << family << " position " << from + t;
    }
    EXPECT_EQ(model.rope_positions(), 2 * (P + 4096)) << family;  // grown once, doubled
  }
}

}  // namespace
}  // namespace sps::testing
