#include "infer/generator.h"

#include <algorithm>

#include "util/error.h"
#include "util/process_stats.h"

namespace sps {

Generator::Generator(Model<float>& model, const BpeTokenizer* tokenizer, GenerationOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      sampler_(options_.sampling, model.config()) {
  if (options_.max_new_tokens < 0)
    fail("--max-new-tokens must be >= 0, got {}", options_.max_new_tokens);
  if (!tokenizer_ && !options_.stop_strings.empty())
    fail("stop strings need a tokenizer");
}

std::vector<std::vector<int32_t>> Generator::encode(const std::vector<std::string>& prompts) const {
  if (!tokenizer_) fail("text prompts need a tokenizer");
  std::vector<std::vector<int32_t>> ids(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r)
    for (uint32_t id : tokenizer_->encode(prompts[r])) ids[r].push_back(int32_t(id));
  return ids;
}

std::vector<Generation> Generator::generate_text(const std::vector<std::string>& prompts,
                                                 const TextCallback& on_text) {
  return generate(encode(prompts), on_text);
}

std::vector<Generation> Generator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                            const TextCallback& on_text) {
  GenerationRun run(*this, prompts);
  while (!run.done())
    for (const GeneratedToken& t : run.step())
      if (!t.text.empty() && on_text) on_text(t.row, t.text);
  stats_ = run.stats();
  return run.results();
}

namespace {

// Prompt `b` as it is fed: [EOS] when empty; every id one the model can be fed; at most
// block_size tokens, keeping the last ones when `truncate_left`, else an error.
std::vector<int32_t> checked_prompt(const std::vector<int32_t>& ids, int64_t b,
                                    const ModelConfig& c, bool truncate_left) {
  std::vector<int32_t> prompt = ids.empty() ? std::vector<int32_t>{c.eos_token_id} : ids;
  for (int32_t id : prompt)
    if (id < 0 || id >= c.vocab_size || id == c.pad_token_id || id == c.predict_token_id)
      fail("prompt {}: id {} cannot be fed (ids are in [0, {}), not PAD {} or PREDICT {})", b, id,
           c.vocab_size, c.pad_token_id, c.predict_token_id);
  if (int64_t(prompt.size()) > c.block_size) {
    if (!truncate_left)
      fail("prompt {} is {} tokens, longer than the model's context of {} tokens "
           "(model.block_size); shorten it or truncate it on the left (--truncate left)",
           b, prompt.size(), c.block_size);
    prompt.erase(prompt.begin(), prompt.end() - c.block_size);
  }
  return prompt;
}

}  // namespace

GenerationRun::GenerationRun(Generator& generator, const std::vector<std::vector<int32_t>>& prompts)
    : generator_(generator) {
  const GenerationOptions& options = generator.options_;
  const ModelConfig& c = generator.model_.config();
  const int64_t B = int64_t(prompts.size()), N = options.max_new_tokens;
  stats_.batch = B;
  out_.resize(B);
  done_ = B == 0;
  if (done_) return;

  int64_t P = 1;
  for (int64_t b = 0; b < B; ++b) {
    Generation& g = out_[b];
    g.prompt = checked_prompt(prompts[b], b, c, options.truncate_left);
    g.truncated = g.prompt.size() < prompts[b].size();
    P = std::max<int64_t>(P, int64_t(g.prompt.size()));
    stats_.prompt_tokens += int64_t(g.prompt.size());
  }
  done_ = N == 0;
  if (done_) return;

  std::vector<int32_t> padded(B * P, c.pad_token_id);
  for (int64_t b = 0; b < B; ++b)
    std::copy(out_[b].prompt.begin(), out_[b].prompt.end(),
              padded.begin() + b * P + P - out_[b].prompt.size());

  DecoderShape shape;
  shape.batch = B;
  shape.max_prompt_tokens = P;
  shape.max_new_tokens = N;  // N − 1 steps are needed; one spare keeps the bound simple
  shape.prefill_rows = options.prefill_rows;
  decoder_ = std::make_unique<Decoder<float>>(generator.model_, shape);
  const StopRule rule{.eos_token_id = c.eos_token_id,
                      .stop_at_eos = options.stop_at_eos,
                      .max_new_tokens = N,
                      .stop_strings = options.stop_strings};
  for (int64_t b = 0; b < B; ++b) {
    stops_.emplace_back(rule, generator.tokenizer_);
    rngs_.push_back(TokenSampler::row_rng(options.sampling.seed, b));
  }
  samplers_.assign(B, &generator.sampler_);
  for (Rng& rng : rngs_) row_rngs_.push_back(&rng);
  row_done_.assign(B, 0);
  next_.assign(B, 0);
  texts_.resize(B);

  const double t0 = now_seconds();
  decoder_->prefill(padded.data(), P);
  generator.model_.release_activations();  // decoding needs only the weights and the cache
  decode_start_ = now_seconds();
  stats_.prefill_seconds = decode_start_ - t0;
}

const std::vector<GeneratedToken>& GenerationRun::step() {
  SPS_ASSERT(!done_);
  const GenerationOptions& options = generator_.options_;
  const BpeTokenizer* tokenizer = generator_.tokenizer_;
  const ModelConfig& c = generator_.model_.config();
  const int64_t B = int64_t(out_.size()), V = c.vocab_size;
  if (feed_) {
    // Finished rows are fed their last token again; their outputs are ignored.
    decoder_->step(next_.data());
    ++stats_.decode_steps;
  }
  TokenSampler::next_tokens(*decoder_, B, samplers_.data(), row_rngs_.data(), next_.data(),
                            row_done_.data());
  chosen_.clear();
  int64_t active = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (row_done_[b]) continue;
    const int32_t token = next_[b];
    Generation& g = out_[b];
    std::string& text = texts_[b];
    g.tokens.push_back(token);
    if (options.logprobs >= 0)
      g.logprobs.push_back(token_logprob(decoder_->logits() + b * V, V, token, options.logprobs,
                                         tokenizer ? tokenizer->vocab_size() : V));
    ++stats_.generated_tokens;
    RowStop& stop = stops_[b];
    text = stop.push(token);
    if (stop.stopped()) {
      g.stop_reason = stop.reason();
      g.text = stop.text();
      row_done_[b] = 1;
    } else {
      ++active;
    }
    chosen_.push_back(
        {b, token, options.logprobs >= 0 ? &g.logprobs.back() : nullptr, text, row_done_[b] != 0});
  }
  feed_ = active > 0;
  if (!feed_) {
    done_ = true;
    stats_.decode_seconds = now_seconds() - decode_start_;
    stats_.kv_cache_allocated_bytes = decoder_->cache().allocated_bytes();
    stats_.kv_cache_used_bytes = decoder_->cache().used_bytes();
  }
  return chosen_;
}

}  // namespace sps
