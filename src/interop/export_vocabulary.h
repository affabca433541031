#pragma once
// A byte-level BPE tokenizer in the form GGUF (tokenizer.ggml.*) and Hugging Face
// (vocab.json, merges.txt) store GPT-2-style tokenizers: every token as a string in GPT-2's
// byte-to-unicode alphabet, and the merges "a b" in priority order. Works for any tokenizer
// whose merge priorities are its ids (GPT-2's files, and the rank files of `sps tokenizer
// train`): the merge that makes token r is recovered by running BPE on r's bytes with the
// tokens ranked below r, which must end in exactly two parts.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "tokenizer/bpe.h"

namespace sps {

enum TokenType : int32_t { kTokenNormal = 1, kTokenControl = 3, kTokenUnused = 5 };

struct ExportVocabulary {
  std::vector<std::string> tokens;  // the model's V entries; past the vocabulary "[PADn]"
  std::vector<int32_t> types;       // TokenType
  std::vector<std::string> merges;  // "a b", in priority order
  uint32_t eos_id = 0;
};

// The tokenizer's EOS must be the model's and its vocabulary must fit the model's.
ExportVocabulary export_vocabulary(const BpeTokenizer& tokenizer, const ModelConfig& config);

// GPT-2's byte-to-unicode alphabet: printable bytes stand for themselves, the others for
// U+0100 onwards, in byte order.
std::string bytes_to_unicode_text(const std::string& bytes);

}  // namespace sps
