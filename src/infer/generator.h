#pragma once
// Generation for people: prompts (text or ids) in, tokens and text out, as one left-padded
// batch through the cached decoder (model/decoder.h) and the sampler (infer/token_sampler.h).
// Text is streamed to a callback as soon as it is final (infer/text_stream.h). A
// GenerationRun does the same one step at a time, for callers that consume tokens as they
// come (an iterator) or stop between steps.
//
// Prompts: an empty prompt becomes [EOS], so generation starts a new document; a prompt
// longer than the model's block_size is an error unless truncate_left keeps its last
// block_size tokens. Generation may run past block_size (see decoder.h).
// A row stops as infer/stop_rule.h says: at EOS (unless stop_at_eos is off), at a stop string,
// or after max_new_tokens tokens.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "infer/stop_rule.h"
#include "infer/token_logprob.h"
#include "infer/token_sampler.h"
#include "model/decoder.h"
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
  int64_t logprobs = -1;       // -1: none; else each token's logprob and this many alternatives
};

struct Generation {
  std::vector<int32_t> prompt;   // the ids fed (after truncation; [EOS] for an empty prompt)
  bool truncated = false;        // the prompt lost tokens on the left
  std::vector<int32_t> tokens;   // generated ids (a stopping EOS included)
  std::string text;              // their text, without a stopping EOS, cut before a stop string
  StopReason stop_reason = StopReason::length;
  std::vector<TokenLogprob> logprobs;  // one per token, when GenerationOptions::logprobs >= 0
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
  // The ids of text prompts, as generate_text feeds them (needs the tokenizer).
  std::vector<std::vector<int32_t>> encode(const std::vector<std::string>& prompts) const;

  const GenerationStats& last_stats() const { return stats_; }
  const GenerationOptions& options() const { return options_; }

 private:
  friend class GenerationRun;
  Model<float>& model_;
  const BpeTokenizer* tokenizer_;
  GenerationOptions options_;
  TokenSampler sampler_;
  GenerationStats stats_;
};

// A token as a step chose it: its row and id, its logprob (null unless asked for), and the
// row's text that became final with it (possibly empty; the held-back rest when it ends the
// row).
struct GeneratedToken {
  int64_t row = 0;
  int32_t id = 0;
  const TokenLogprob* logprob = nullptr;
  std::string_view text;
  bool last = false;  // the row stopped with this token
};

// One batch of prompts generated a step at a time: the constructor checks and prefills the
// prompts; each step() chooses the next token of every row still going (and feeds the
// previous step's tokens first). The tokens are generate()'s, which runs one of these.
class GenerationRun {
 public:
  GenerationRun(Generator& generator, const std::vector<std::vector<int32_t>>& prompts);

  bool done() const { return done_; }
  // The tokens chosen, in row order; valid until the next step. Call only while !done().
  const std::vector<GeneratedToken>& step();
  const std::vector<GeneratedToken>& step_tokens() const { return chosen_; }  // the last step's
  // Every row's generation so far (complete once done()).
  const std::vector<Generation>& results() const { return out_; }
  const GenerationStats& stats() const { return stats_; }

 private:
  Generator& generator_;
  std::vector<Generation> out_;
  GenerationStats stats_;
  std::unique_ptr<Decoder<float>> decoder_;
  std::vector<RowStop> stops_;  // one for every row
  std::vector<Rng> rngs_;
  std::vector<const TokenSampler*> samplers_;  // one for every row
  std::vector<Rng*> row_rngs_;
  std::vector<uint8_t> row_done_;
  std::vector<int32_t> next_;
  std::vector<std::string> texts_;  // this step's text of each row
  std::vector<GeneratedToken> chosen_;
  bool feed_ = false;  // next_ is still to be fed to the decoder
  bool done_ = false;
  double decode_start_ = 0;
};

}  // namespace sps
