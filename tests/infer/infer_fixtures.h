#pragma once
// Shared by the inference tests: a micro model over the byte tokenizer (256 byte tokens,
// EOS 256, PREDICT 257, V 320, PAD 319), so text round-trips without tokenizer files.
#include <sstream>
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

// The `model:` section of a config.yaml for `c`, as a checkpoint folder holds it.
inline std::string model_yaml(const ModelConfig& c) {
  std::ostringstream y;
  y << "model:\n  family: " << c.family << "\n  n_layer: " << c.n_layer << "\n  n_head: " << c.n_head
    << "\n  hidden_size: " << c.hidden_size << "\n  intermediate_size: " << c.intermediate_size
    << "\n  vocab_size: " << c.vocab_size << "\n  block_size: " << c.block_size
    << "\n  window_size: " << c.window_size << "\n  eos_token_id: " << c.eos_token_id
    << "\n  predict_token_id: " << c.predict_token_id << "\n  pad_token_id: " << c.pad_token_id
    << "\n  init_std: " << c.init_std << "\n";
  return y.str();
}

}  // namespace sps::testing
