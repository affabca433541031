#include "infer/generator.h"

#include <algorithm>

#include "infer/text_stream.h"
#include "model/decoder.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::eos: return "eos";
    case StopReason::stop_string: return "stop";
    case StopReason::length: return "length";
  }
  return "length";
}

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

std::vector<Generation> Generator::generate_text(const std::vector<std::string>& prompts,
                                                 const TextCallback& on_text) {
  if (!tokenizer_) fail("text prompts need a tokenizer");
  std::vector<std::vector<int32_t>> ids(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r)
    for (uint32_t id : tokenizer_->encode(prompts[r])) ids[r].push_back(int32_t(id));
  return generate(ids, on_text);
}

std::vector<Generation> Generator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                            const TextCallback& on_text) {
  const ModelConfig& c = model_.config();
  const int64_t B = int64_t(prompts.size()), V = c.vocab_size, N = options_.max_new_tokens;
  stats_ = {};
  stats_.batch = B;
  std::vector<Generation> out(B);
  if (B == 0) return out;

  int64_t P = 1;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t>& prompt = out[b].prompt;
    prompt = prompts[b].empty() ? std::vector<int32_t>{c.eos_token_id} : prompts[b];
    for (int32_t id : prompt)
      if (id < 0 || id >= V || id == c.pad_token_id || id == c.predict_token_id)
        fail("prompt {}: id {} cannot be fed (ids are in [0, {}), not PAD {} or PREDICT {})", b, id,
             V, c.pad_token_id, c.predict_token_id);
    if (int64_t(prompt.size()) > c.block_size) {
      if (!options_.truncate_left)
        fail("prompt {} is {} tokens, longer than the model's context of {} tokens "
             "(model.block_size); shorten it or truncate it on the left (--truncate left)",
             b, prompt.size(), c.block_size);
      prompt.erase(prompt.begin(), prompt.end() - c.block_size);
      out[b].truncated = true;
    }
    P = std::max<int64_t>(P, int64_t(prompt.size()));
    stats_.prompt_tokens += int64_t(prompt.size());
  }
  if (N == 0) return out;

  std::vector<int32_t> padded(B * P, c.pad_token_id);
  for (int64_t b = 0; b < B; ++b)
    std::copy(out[b].prompt.begin(), out[b].prompt.end(), padded.begin() + b * P + P - out[b].prompt.size());

  DecoderShape shape;
  shape.batch = B;
  shape.max_prompt_tokens = P;
  shape.max_new_tokens = N;  // N − 1 steps are needed; one spare keeps the bound simple
  shape.prefill_rows = options_.prefill_rows;
  Decoder<float> decoder(model_, shape);
  std::vector<TextStream> streams;
  std::vector<Rng> rngs;
  for (int64_t b = 0; b < B; ++b) {
    streams.emplace_back(options_.stop_strings);
    rngs.push_back(TokenSampler::row_rng(options_.sampling.seed, b));
  }
  const std::vector<const TokenSampler*> samplers(B, &sampler_);  // one for every row
  std::vector<Rng*> row_rngs;
  for (Rng& rng : rngs) row_rngs.push_back(&rng);
  std::vector<uint8_t> done(B, 0);
  std::vector<int32_t> next(B, 0);

  double t0 = now_seconds();
  decoder.prefill(padded.data(), P);
  model_.release_activations();  // decoding needs only the weights and the cache
  stats_.prefill_seconds = now_seconds() - t0;
  t0 = now_seconds();
  auto emit = [&](int64_t b, const std::string& piece) {
    if (!piece.empty() && on_text) on_text(b, piece);
  };
  for (int64_t produced = 0;; ++produced) {
    int64_t active = 0;
    TokenSampler::next_tokens(decoder, B, samplers.data(), row_rngs.data(), next.data(),
                              done.data());
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      const int32_t token = next[b];
      Generation& g = out[b];
      g.tokens.push_back(token);
      ++stats_.generated_tokens;
      if (token == c.eos_token_id && options_.stop_at_eos) {
        g.stop_reason = StopReason::eos;
        done[b] = 1;
      } else if (tokenizer_) {
        const uint32_t id = uint32_t(token);
        emit(b, streams[b].push(tokenizer_->decode({&id, 1})));
        if (streams[b].stopped()) {
          g.stop_reason = StopReason::stop_string;
          done[b] = 1;
        }
      }
      if (!done[b] && int64_t(g.tokens.size()) >= N) {
        g.stop_reason = StopReason::length;
        done[b] = 1;
      }
      if (done[b]) {
        emit(b, streams[b].finish());
        g.text = streams[b].text();
      } else {
        ++active;
      }
    }
    if (active == 0) break;
    // Finished rows are fed their last token again; their outputs are ignored.
    decoder.step(next.data());
    ++stats_.decode_steps;
  }
  stats_.decode_seconds = now_seconds() - t0;
  stats_.kv_cache_allocated_bytes = decoder.cache().allocated_bytes();
  stats_.kv_cache_used_bytes = decoder.cache().used_bytes();
  return out;
}

}  // namespace sps
