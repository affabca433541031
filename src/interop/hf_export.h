#pragma once
// Export to a Hugging Face style folder: config.json, model.safetensors and the tokenizer's
// files (vocab.json and merges.txt in GPT-2's byte-level BPE form, tokenizer_config.json).
//   - standard: LlamaForCausalLM. Weights under transformers' Llama names; q_proj and k_proj
//     rows permuted per head from our adjacent-pair RoPE layout to the rotate-half layout
//     transformers applies (new row j = old row 2j, new row j + D/2 = old row 2j + 1),
//     tied embeddings (no lm_head.weight).
//   - interleaved families: no transformers class runs them; the weights keep the parameter
//     names of docs/model.md §2 (= the reference code's) and its layout, and config.json
//     carries the reference's model_args plus an "sps" section with family, window and
//     special ids.
// The folder is written under a temporary name and renamed into place.
#include <cstdint>
#include <string>
#include <vector>

#include "interop/export_vocabulary.h"
#include "model/config.h"

namespace sps {

// Rotate-half row order of one head's D rows: out[j] = in[perm[j]].
std::vector<int64_t> rotate_half_rows(int64_t head_dim);

void write_hf_folder(const std::string& out_dir, const ModelConfig& config, const float* weights,
                     const ExportVocabulary& vocabulary);

}  // namespace sps
