#include "interop/hf_export.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "interop/checkpoint_folder.h"
#include "model/params.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/safetensors.h"

namespace sps {

namespace {

nlohmann::ordered_json llama_config(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.n_layer;
  j["num_attention_heads"] = c.n_head;
  j["num_key_value_heads"] = c.n_head;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.block_size;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = true;
  j["bos_token_id"] = c.eos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["pad_token_id"] = c.pad_token_id;
  j["torch_dtype"] = "float32";
  return j;
}

nlohmann::ordered_json sps_config(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"SPSForCausalLM"};
  j["model_type"] = "sps";
  // The reference trainer's model_args, so its model class can be built from them.
  j["block_size"] = c.block_size;
  j["vocab_size"] = c.vocab_size;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["norm_eps"] = c.norm_eps;
  j["bias"] = false;
  j["eos_token_id"] = c.eos_token_id;
  j["pad_token_id"] = c.pad_token_id;
  j["predict_token_id"] = c.predict_token_id;
  j["window_size"] = c.window_size;
  j["sps"] = {{"family", c.family},
              {"window_size", c.window_size},
              {"eos_token_id", c.eos_token_id},
              {"predict_token_id", c.predict_token_id},
              {"pad_token_id", c.pad_token_id},
              {"rope_theta", c.rope_theta},
              {"rope_layout", "adjacent_pairs"},
              {"weights", "the reference code's parameter names (sps: docs/model.md §2); "
                          "lm_head.weight is tied to transformer.wte.weight"}};
  return j;
}

}  // namespace

std::vector<int64_t> rotate_half_rows(int64_t head_dim) {
  std::vector<int64_t> perm(static_cast<size_t>(head_dim));
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    perm[size_t(j)] = 2 * j;
    perm[size_t(j + head_dim / 2)] = 2 * j + 1;
  }
  return perm;
}

void write_hf_folder(const std::string& out_dir, const ModelConfig& c, const float* w,
                     const ExportVocabulary& vocabulary) {
  nlohmann::ordered_json vocab_json;  // the tokens only, not the padding past them
  for (size_t id = 0; id <= vocabulary.eos_id; ++id) vocab_json[vocabulary.tokens[id]] = id;
  const std::string vocab = vocab_json.dump() + "\n";
  std::string merges = "#version: 0.2\n";
  for (const std::string& m : vocabulary.merges) merges += m + "\n";
  const ParamTable table(c);
  const bool standard = c.family == "standard";
  const int64_t d = c.hidden_size, D = c.head_dim();

  // Standard: Llama names, q and k permuted; staged copies of the permuted blocks.
  std::vector<std::vector<float>> staged;
  std::vector<TensorToWrite> tensors;
  if (standard) {
    const std::vector<int64_t> perm = rotate_half_rows(D);
    auto permuted = [&](const float* block) {
      std::vector<float> out(size_t(d * d));
      for (int64_t h = 0; h < c.n_head; ++h)
        for (int64_t j = 0; j < D; ++j)
          std::copy(block + (h * D + perm[size_t(j)]) * d, block + (h * D + perm[size_t(j)] + 1) * d,
                    out.begin() + (h * D + j) * d);
      staged.push_back(std::move(out));
      return staged.back().data();
    };
    staged.reserve(size_t(2 * c.n_layer));
    tensors.push_back({"model.embed_tokens.weight", DType::F32, {c.vocab_size, d}, w + table.wte()});
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const LayerParams& p = table.layer(l);
      const std::string b = "model.layers." + std::to_string(l) + ".";
      const int64_t F = c.intermediate_size;
      tensors.push_back({b + "input_layernorm.weight", DType::F32, {d}, w + p.attention_norm});
      tensors.push_back({b + "self_attn.q_proj.weight", DType::F32, {d, d}, permuted(w + p.c_attn)});
      tensors.push_back({b + "self_attn.k_proj.weight", DType::F32, {d, d}, permuted(w + p.c_attn + d * d)});
      tensors.push_back({b + "self_attn.v_proj.weight", DType::F32, {d, d}, w + p.c_attn + 2 * d * d});
      tensors.push_back({b + "self_attn.o_proj.weight", DType::F32, {d, d}, w + p.c_proj});
      tensors.push_back({b + "post_attention_layernorm.weight", DType::F32, {d}, w + p.mlp_norm});
      tensors.push_back({b + "mlp.gate_proj.weight", DType::F32, {F, d}, w + p.gate_up});
      tensors.push_back({b + "mlp.up_proj.weight", DType::F32, {F, d}, w + p.gate_up + F * d});
      tensors.push_back({b + "mlp.down_proj.weight", DType::F32, {d, F}, w + p.down_proj});
    }
    tensors.push_back({"model.norm.weight", DType::F32, {d}, w + table.output_norm()});
  } else {
    for (const auto& e : table.entries()) tensors.push_back({e.name, DType::F32, e.shape, w + e.offset});
  }

  const std::string config = (standard ? llama_config(c) : sps_config(c)).dump(2) + "\n";
  nlohmann::ordered_json tokenizer_config;
  tokenizer_config["tokenizer_class"] = "GPT2Tokenizer";
  tokenizer_config["model_max_length"] = c.block_size;
  tokenizer_config["bos_token"] = "<|endoftext|>";
  tokenizer_config["eos_token"] = "<|endoftext|>";
  tokenizer_config["add_bos_token"] = false;

  write_folder_atomically(out_dir, [&](const std::string& dir) {
    write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
    write_file_atomically(dir + "/config.json", config);
    write_file_atomically(dir + "/vocab.json", vocab);
    write_file_atomically(dir + "/merges.txt", merges);
    write_file_atomically(dir + "/tokenizer_config.json", tokenizer_config.dump(2) + "\n");
  });
}

}  // namespace sps
