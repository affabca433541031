#pragma once
// Export of a standard-family model to GGUF (version 3) as a llama-architecture model, for
// llama.cpp and the tools built on it:
//   - RoPE: our adjacent-pair layout is llama.cpp's "normal" rope of the llama
//     architecture, so q and k rows are written as they are (no rotate-half permutation);
//   - c_attn is split into attn_q / attn_k / attn_v; no output.weight (llama.cpp then uses
//     token_embd for the tied head);
//   - context length = block_size, RMSNorm epsilon = norm_eps, rope base = rope_theta;
//   - the tokenizer as tokenizer.ggml.* (GPT-2's byte-level BPE: tokens, types, merges), the
//     padded entries past the vocabulary marked unused.
// Interleaved families are refused: no runtime outside sps runs them.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace sps {

enum class GgufFloat { f32, f16, bf16 };

// GGML tensor type ids (ggml.h) and GGUF metadata value types (gguf.h).
enum : uint32_t { kGgmlF32 = 0, kGgmlF16 = 1, kGgmlBf16 = 30 };
enum : uint32_t {
  kGgufU32 = 4, kGgufI32 = 5, kGgufF32 = 6, kGgufBool = 7, kGgufString = 8, kGgufArray = 9,
};
constexpr uint32_t kGgufAlignment = 32;

struct GgufTokenizer {
  std::vector<std::string> tokens;  // V entries, GPT-2's byte-to-unicode alphabet
  std::vector<int32_t> types;       // 1 normal, 3 control, 5 unused
  std::vector<std::string> merges;  // "a b", in priority order
  uint32_t eos_id = 0;
};

// GPT-2's tokenizer files (a folder with encoder.json and vocab.bpe) padded to the model's
// vocabulary. The model's EOS must be the files' <|endoftext|>.
GgufTokenizer gguf_tokenizer_from_gpt2(const std::string& folder, const ModelConfig& config);

// Writes `path` atomically. `weights` in ParamTable order.
void write_gguf(const std::string& path, const ModelConfig& config, const float* weights,
                const GgufTokenizer& tokenizer, GgufFloat precision, const std::string& name);

GgufFloat gguf_float_by_name(const std::string& name);  // f32 | f16 | bf16

}  // namespace sps
