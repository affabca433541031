#pragma once
// Generation for people: prompts (text or ids) in, tokens and text out, as one left-padded
// batch through the cached decoder (model/decoder.h) and the sampler (infer/token_sampler.h).
// Text is streamed to a callback as soon as it is final (infer/text_stream.h).
//
// Prompts: an empty prompt becomes [EOS], so generation starts a new document; a prompt
// longer than the model's block_size is an error unless truncate_left keeps its last
// block_size tokens. Generation may run past block_size (see decoder.h).
// A row stops at EOS (unless stop_at_eos is off: then EOS starts a new document and the
// row goes on), at a stop string, or after max_new_tokens tokens.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "infer/token_sampler.h"
#include "model/model.h"
#include "tokenizer/bpe.h"

namespace sps {

struct GenerationOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<std::string> stop_strings;  // needs a tokenizer
  bool stop_at_eos = true;
  bool truncate_left = false;  // over-long prompts keep their last block_size tokens
  int64_t prefill_rows = 0;    // rows per prefill forward (0: as DecoderShape chooses)
};

enum class StopReason { eos, stop_string, length };
const char* stop_reason_name(StopReason reason);  // "eos" | "stop" | "length"

struct Generation {
  std::vector<int32_t> prompt;   // the ids fed (after truncation; [EOS] for an empty prompt)
  bool truncated = false;        // the prompt lost tokens on the left
  std::vector<int32_t> tokens;   // generated ids (a stopping EOS included)
  std::string text;              // their text, without a stopping EOS, cut before a stop string
  StopReason stop_reason = StopReason::length;
};

struct GenerationStats {
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t batch = 0, prompt_tokens = 0, generated_tokens = 0, decode_steps = 0;
  int64_t kv_cache_allocated_bytes = 0, kv_cache_used_bytes = 0;  // at the end
};

// (row, text) as each piece becomes final.
using TextCallback = std::function<void(int64_t row, std::string_view text)>;

class Generator {
 public:
  // `tokenizer` may be null (ids only: no text, no stop strings). Checks the options.
  Generator(Model<float>& model, const BpeTokenizer* tokenizer, GenerationOptions options);

  std::vector<Generation> generate(const std::vector<std::vector<int32_t>>& prompts,
                                   const TextCallback& on_text = {});
  std::vector<Generation> generate_text(const std::vector<std::string>& prompts,
                                        const TextCallback& on_text = {});

  const GenerationStats& last_stats() const { return stats_; }
  const GenerationOptions& options() const { return options_; }

 private:
  Model<float>& model_;
  const BpeTokenizer* tokenizer_;
  GenerationOptions options_;
  TokenSampler sampler_;
  GenerationStats stats_;
};

}  // namespace sps
