#pragma once
// A byte-level tokenizer (256 single bytes, EOS 256, PREDICT 257, V 320, PAD 319) and a small
// random model for the evaluation tests.
#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/bpe.h"

namespace sps::testing {

inline BpeTokenizer byte_tokenizer() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
  return BpeTokenizer::from_ranks(std::move(tokens), "bytes");
}

inline ModelConfig small_eval_config(const std::string& family = "sps", int64_t window = 2,
                                     int64_t block = 16) {
  ModelConfig c;
  c.family = family;
  c.n_layer = 2;
  c.n_head = 2;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.vocab_size = 320;
  c.block_size = block;
  c.window_size = window;
  c.eos_token_id = 256;
  c.predict_token_id = 257;
  c.pad_token_id = 319;
  return c;
}

}  // namespace sps::testing
