#pragma once
// Export of a standard-family model to GGUF (version 3) as a llama-architecture model, for
// llama.cpp and the tools built on it:
//   - RoPE: our adjacent-pair layout is llama.cpp's "normal" rope of the llama
//     architecture, so q and k rows are written as they are (no rotate-half permutation);
//   - c_attn is split into attn_q / attn_k / attn_v; no output.weight (llama.cpp then uses
//     token_embd for the tied head);
//   - context length = block_size, RMSNorm epsilon = norm_eps, rope base = rope_theta;
//   - the tokenizer as tokenizer.ggml.* (byte-level BPE: tokens, types, merges; see
//     export_vocabulary.h), the padded entries past the vocabulary marked unused.
// Interleaved families are refused: no runtime outside sps runs them.
#include <cstdint>
#include <string>
#include <vector>

#include "interop/export_vocabulary.h"
#include "model/config.h"

namespace sps {

// How the 2-D weights are stored (norms stay F32): F32, F16, BF16, or Q8_0 (blocks of 32 along
// a row, an fp16 scale and 32 int8 each: ops::quantize_q8_block, the int8 weights of
// `--weight-type int8`).
enum class GgufType { f32, f16, bf16, q8_0 };

// GGML tensor type ids (ggml.h) and GGUF metadata value types (gguf.h).
enum : uint32_t { kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8, kGgmlBf16 = 30 };
enum : uint32_t {
  kGgufU32 = 4, kGgufI32 = 5, kGgufF32 = 6, kGgufBool = 7, kGgufString = 8, kGgufArray = 9,
};
constexpr uint32_t kGgufAlignment = 32;

// Writes `path` atomically. `weights` in ParamTable order.
void write_gguf(const std::string& path, const ModelConfig& config, const float* weights,
                const ExportVocabulary& vocabulary, GgufType precision, const std::string& name);

GgufType gguf_type_by_name(const std::string& name);  // f32 | f16 | bf16 | q8_0

}  // namespace sps
