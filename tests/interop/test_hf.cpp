// Hugging Face folder export: Llama names and config for the standard family, with q and k
// rows permuted so that transformers' rotate-half RoPE gives the same attention scores as
// our adjacent-pair RoPE; the parameter names of docs/model.md §2 and an "sps" section for
// interleaved families.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "interop/hf_export.h"
#include "interop/reference_checkpoint.h"
#include "interop_fixtures.h"
#include "model/params.h"
#include "util/error.h"
#include "util/safetensors.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using testing::fixture_vocabulary;
using testing::interop_fixture;


// docs/model.md §2: adjacent pairs (x_2j, x_2j+1) rotated by pos·θ^(−2j/D).
std::vector<double> rope_adjacent(std::vector<double> x, double pos) {
  const size_t D = x.size();
  for (size_t j = 0; j < D / 2; ++j) {
    const double a = pos * std::pow(10000.0, -2.0 * double(j) / double(D));
    const double x0 = x[2 * j], x1 = x[2 * j + 1];
    x[2 * j] = x0 * std::cos(a) - x1 * std::sin(a);
    x[2 * j + 1] = x0 * std::sin(a) + x1 * std::cos(a);
  }
  return x;
}

// transformers' Llama: x·cos + rotate_half(x)·sin, pairs (x_j, x_j+D/2) at frequency j.
std::vector<double> rope_rotate_half(std::vector<double> x, double pos) {
  const size_t D = x.size(), h = D / 2;
  for (size_t j = 0; j < h; ++j) {
    const double a = pos * std::pow(10000.0, -2.0 * double(j) / double(D));
    const double x0 = x[j], x1 = x[j + h];
    x[j] = x0 * std::cos(a) - x1 * std::sin(a);
    x[j + h] = x1 * std::cos(a) + x0 * std::sin(a);
  }
  return x;
}

// One head's rows [h·D, (h+1)·D) of a [d, d] weight times x.
std::vector<double> head_projection(const std::vector<double>& w, int64_t d, int64_t D, int64_t head,
                                    const std::vector<double>& x) {
  std::vector<double> out(size_t(D), 0.0);
  for (int64_t r = 0; r < D; ++r)
    for (int64_t c = 0; c < d; ++c) out[size_t(r)] += w[size_t((head * D + r) * d + c)] * x[size_t(c)];
  return out;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(HfExport, StandardIsLlamaWithRotateHalfRows) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("standard_fp32_compiled.pt"), {});
  const std::string out = dir.file("hf");
  write_hf_folder(out, ckpt.config, ckpt.weights.data(), fixture_vocabulary());

  const nlohmann::json config = nlohmann::json::parse(testing::read_whole_file(out + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["hidden_size"], 8);
  EXPECT_EQ(config["intermediate_size"], 16);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["num_attention_heads"], 2);
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["max_position_embeddings"], 8);
  EXPECT_EQ(config["vocab_size"], 64);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["rope_theta"], 10000.0);
  EXPECT_EQ(config["rms_norm_eps"], 1e-6);
  EXPECT_EQ(config["eos_token_id"], 61);
  EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer_config.json"));
  const nlohmann::json vocab = nlohmann::json::parse(testing::read_whole_file(out + "/vocab.json"));
  EXPECT_EQ(vocab.size(), 62u);  // the tokens and EOS, not the padding
  EXPECT_EQ(vocab["B"], 1);
  EXPECT_EQ(vocab["<|endoftext|>"], 61);
  EXPECT_EQ(testing::read_whole_file(out + "/merges.txt"), "#version: 0.2\nA B\nAB C\n");

  SafetensorsFile st(out + "/model.safetensors");
  EXPECT_EQ(st.header().tensors.size(), 1u + 2 * 9 + 1);
  EXPECT_EQ(st.find("lm_head.weight"), nullptr);  // tied
  const ParamTable table(ckpt.config);
  const float* w = ckpt.weights.data();
  auto same = [&](const std::string& name, const float* want, int64_t n) {
    const std::vector<double> got = st.read_as_double(name);
    ASSERT_EQ(int64_t(got.size()), n) << name;
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(got[size_t(k)], double(want[k])) << name << " " << k;
  };
  same("model.embed_tokens.weight", w + table.wte(), 64 * 8);
  same("model.layers.1.self_attn.v_proj.weight", w + table.layer(1).c_attn + 128, 64);
  same("model.layers.1.self_attn.o_proj.weight", w + table.layer(1).c_proj, 64);
  same("model.layers.0.input_layernorm.weight", w + table.layer(0).attention_norm, 8);
  same("model.layers.0.post_attention_layernorm.weight", w + table.layer(0).mlp_norm, 8);
  same("model.layers.0.mlp.down_proj.weight", w + table.layer(0).down_proj, 128);
  same("model.norm.weight", w + table.output_norm(), 8);

  // The attention scores: q_m·k_n with our RoPE on the original rows equals q'_m·k'_n with
  // transformers' RoPE on the exported rows, for every head and position pair.
  const int64_t d = 8, D = 4;
  for (int64_t l = 0; l < 2; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".self_attn.";
    const std::vector<double> q_hf = st.read_as_double(b + "q_proj.weight");
    const std::vector<double> k_hf = st.read_as_double(b + "k_proj.weight");
    const float* c_attn = w + table.layer(l).c_attn;
    const std::vector<double> q_ours(c_attn, c_attn + d * d), k_ours(c_attn + d * d, c_attn + 2 * d * d);
    const std::vector<double> x1 = {0.3, -1.2, 0.5, 0.8, -0.1, 1.1, -0.7, 0.2};
    const std::vector<double> x2 = {-0.4, 0.9, 1.3, -0.6, 0.25, -1.0, 0.45, 0.7};
    for (int64_t h = 0; h < 2; ++h)
      for (double m : {0.0, 3.0, 7.0})
        for (double n : {0.0, 2.0, 5.0}) {
          const double ours = dot(rope_adjacent(head_projection(q_ours, d, D, h, x1), m),
                                  rope_adjacent(head_projection(k_ours, d, D, h, x2), n));
          const double theirs = dot(rope_rotate_half(head_projection(q_hf, d, D, h, x1), m),
                                    rope_rotate_half(head_projection(k_hf, d, D, h, x2), n));
          EXPECT_NEAR(ours, theirs, 1e-9) << "layer " << l << " head " << h;
        }
  }
}

TEST(HfExport, RotateHalfRowOrder) {
  EXPECT_EQ(rotate_half_rows(8), (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
}

TEST(HfExport, InterleavedKeepsSpecNamesAndAnSpsSection) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("delayed_state_bf16_plain.pt"), {});
  const std::string out = dir.file("hf");
  write_hf_folder(out, ckpt.config, ckpt.weights.data(), fixture_vocabulary());
  const nlohmann::json config = nlohmann::json::parse(testing::read_whole_file(out + "/config.json"));
  EXPECT_EQ(config["sps"]["family"], "delayed_state");
  EXPECT_EQ(config["sps"]["window_size"], 2);
  EXPECT_EQ(config["sps"]["predict_token_id"], 62);
  EXPECT_EQ(config["sps"]["eos_token_id"], 61);
  EXPECT_EQ(config["sps"]["pad_token_id"], 63);
  EXPECT_EQ(config["window_size"], 2);
  EXPECT_EQ(config["n_layer"], 2);
  SafetensorsFile st(out + "/model.safetensors");
  const ParamTable table(ckpt.config);
  EXPECT_EQ(st.header().tensors.size(), table.entries().size());
  for (const auto& e : table.entries()) {
    const std::vector<double> got = st.read_as_double(e.name);
    for (int64_t k = 0; k < e.numel; ++k) ASSERT_EQ(got[size_t(k)], double(ckpt.weights[size_t(e.offset + k)])) << e.name;
  }
  // An existing folder is refused, and nothing else is left behind.
  EXPECT_THROW(write_hf_folder(out, ckpt.config, ckpt.weights.data(), fixture_vocabulary()), UserError);
  EXPECT_EQ(dir.entries(), 1u);
}

}  // namespace
}  // namespace sps
