#pragma once
// Choosing the next token from logits (docs/model.md §7): greedy by default; with a temperature,
// sampling after top-k and top-p (nucleus) filtering, in that order. PAD and PREDICT are
// never emitted, nor forbidden ids, nor ids at or above `allowed_ids` (a tokenizer's
// vocabulary is smaller than the padded V).
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/decoder.h"
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

  // The next token from logits [V]. Allocates nothing after a thread's first call; threads
  // may call it side by side.
  int32_t sample(const float* logits, Rng& rng) const;

  // tokens[i] = the next token of the decoder's row i (i < rows; its last logits, one
  // position per row), drawn by *samplers[i] from *rngs[i], for the rows whose skip[i] is 0
  // (skip may be null). A row whose sampler decides from fewer ids than the row allows
  // (greedy, or top-k up to ops::kMaxTopK) takes those candidates, chosen where the logits are
  // (Decoder::top_k, once per run of rows sharing a sampler); the others draw from their whole
  // rows, side by side. The tokens sample() gives for those rows, drawing the same numbers;
  // a UserError when a row holds a non-finite logit.
  static void next_tokens(Decoder<float>& decoder, int64_t rows,
                          const TokenSampler* const* samplers, Rng* const* rngs,
                          int32_t* tokens, const uint8_t* skip = nullptr);

  bool greedy() const { return options_.temperature == 0; }
  const SamplingOptions& options() const { return options_; }

  // The random stream of row `row` (rows of a batch sample independently).
  static Rng row_rng(uint64_t seed, int64_t row);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    double weight;  // unnormalised probability
  };
  // The next token from a row's candidates_needed_ most likely allowed ids, most likely
  // first and the lower id on a tie, and their logits (ops::top_k_rows over banned_).
  int32_t sample_candidates(const int32_t* ids, const float* logits, Rng& rng) const;
  int64_t first_nonfinite(const float* logits) const;  // the lowest such id, or −1
  int32_t sample_finite(const float* logits, Rng& rng) const;
  // Draws from candidates[0..n), in their order; top-p first keeps the fewest most likely.
  int32_t draw(std::vector<Candidate>& candidates, int64_t n, Rng& rng) const;
  static std::vector<Candidate>& scratch();  // the calling thread's

  SamplingOptions options_;
  int64_t V_ = 0;
  // How many of a row's most likely allowed ids decide its next token: 1 when greedy, top_k
  // when that is fewer than the allowed ids and at most ops::kMaxTopK, else 0 (the whole row).
  int64_t candidates_needed_ = 0;
  std::vector<uint8_t> banned_;                   // [V] nonzero: never emitted
};

}  // namespace sps
