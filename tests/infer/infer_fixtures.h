#pragma once
// Shared by the inference tests: a micro model over the byte tokenizer (256 byte tokens,
// EOS 256, PREDICT 257, V 320, PAD 319), so text round-trips without tokenizer files.
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model.h"
#include "model/model_fixtures.h"
#include "tokenizer/bpe.h"

namespace sps::testing {

inline const BpeTokenizer& byte_level_tokenizer() {
  static const BpeTokenizer tokenizer = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    return BpeTokenizer::from_ranks(std::move(tokens), "bytes");
  }();
  return tokenizer;
}

inline ModelConfig byte_micro_config(const std::string& family, int64_t window) {
  ModelConfig c = micro_config(family, window);
  c.vocab_size = 320;
  c.eos_token_id = 256;
  c.predict_token_id = 257;
  c.pad_token_id = 319;
  c.block_size = 16;
  return c;
}

}  // namespace sps::testing
