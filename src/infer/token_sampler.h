#pragma once
// Choosing the next token from logits (docs/model.md §7): greedy by default; with a temperature,
// sampling after top-k and top-p (nucleus) filtering, in that order. PAD and PREDICT are
// never emitted, nor forbidden ids, nor ids at or above `allowed_ids` (a tokenizer's
// vocabulary is smaller than the padded V).
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "util/rng.h"

namespace sps {

struct SamplingOptions {
  double temperature = 0;           // 0: greedy (argmax, the lowest id on ties)
  int64_t top_k = 0;                // keep the k most likely ids (0: all)
  double top_p = 1;                 // keep the fewest most likely ids whose mass reaches p
  uint64_t seed = 0;                // each row draws from its own stream of this seed
  std::vector<int32_t> forbidden;   // ids never emitted
  int64_t allowed_ids = 0;          // only ids below this are emitted (0: all of V)
};

class TokenSampler {
 public:
  // Checks the options against the model (UserError naming the option).
  TokenSampler(const SamplingOptions& options, const ModelConfig& config);

  // The next token from logits [V]. Allocates nothing after the first call.
  int32_t sample(const float* logits, Rng& rng);

  bool greedy() const { return options_.temperature == 0; }
  const SamplingOptions& options() const { return options_; }

  // The random stream of row `row` (rows of a batch sample independently).
  static Rng row_rng(uint64_t seed, int64_t row);

 private:
  int32_t argmax(const float* logits) const;

  SamplingOptions options_;
  int64_t V_ = 0;
  std::vector<uint8_t> banned_;      // [V]
  std::vector<int32_t> candidates_;  // scratch: ids still in play
  std::vector<double> weights_;      // scratch: [V] unnormalised probabilities by id
};

}  // namespace sps
