#pragma once
// Cached decoding against the training forward, on any backend: a batch of sequences, each
// prefilled to its prompt length (left-padded), then fed one token per step or in extends,
// and every logits row the decoder gives compared with the forward of that sequence alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gradcheck.h"
#include "model/decoder.h"
#include "model/model.h"

namespace sps::testing {

template <typename T>
struct DecodeTolerance;
template <>
struct DecodeTolerance<float> {
  static constexpr double value = 1e-4;
};
template <>
struct DecodeTolerance<double> {
  static constexpr double value = 1e-10;
};

// Row b: `prompt_lengths[b]` prompt tokens of `sequences[b]`, then the rest fed `chunk` per
// call (one per step when chunk is 1; extends cut after any row's EOS otherwise). Checks every
// logits row against the training forward of that sequence alone, within `tolerance`
// (default: DecodeTolerance<T>).
template <typename T>
void check_against_forward(Model<T>& model, const std::vector<std::vector<int32_t>>& sequences,
                           const std::vector<int64_t>& prompt_lengths, int64_t prefill_rows = 0,
                           int64_t chunk = 1, double tolerance = DecodeTolerance<T>::value) {
  const ModelConfig& c = model.config();
  const int64_t B = int64_t(sequences.size()), V = c.vocab_size;
  int64_t P = 0, steps = 0;
  for (int64_t b = 0; b < B; ++b) {
    P = std::max(P, prompt_lengths[b]);
    steps = std::max(steps, int64_t(sequences[b].size()) - prompt_lengths[b]);
  }
  // Expected logits of every position of every sequence, each run alone.
  std::vector<std::vector<double>> expected(B);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = int64_t(sequences[b].size());
    expected[b].resize(n * V);
    model.forward(sequences[b].data(), sequences[b].data(), 1, n, {nullptr, expected[b].data()});
  }
  DecoderShape shape;
  shape.batch = B;
  shape.max_prompt_tokens = P;
  shape.max_new_tokens = steps;
  shape.max_chunk_tokens = chunk;
  shape.prefill_rows = prefill_rows;
  Decoder<T> decoder(model, shape);
  std::vector<int32_t> prompts(B * P, c.pad_token_id);
  for (int64_t b = 0; b < B; ++b)
    std::copy(sequences[b].begin(), sequences[b].begin() + prompt_lengths[b],
              prompts.begin() + b * P + P - prompt_lengths[b]);
  decoder.prefill(prompts.data(), P);
  // The logits of the last call, K per row, the first for the token after `fed` fed ones.
  const auto check = [&](int64_t fed, int64_t K) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < K; ++t) {
        const int64_t position = prompt_lengths[b] - 1 + fed + t;
        if (position >= int64_t(sequences[b].size())) continue;
        EXPECT_LT(max_relative_error(decoder.logits() + (b * K + t) * V, expected[b].data() + position * V, V),
                  tolerance)
            << "row " << b << " position " << position << " chunk " << chunk;
      }
  };
  check(0, 1);
  for (int64_t fed = 0; fed < steps;) {
    int64_t K = std::min(chunk, steps - fed);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < K; ++t) {
        const int64_t position = prompt_lengths[b] + fed + t;
        if (position < int64_t(sequences[b].size()) && sequences[b][position] == c.eos_token_id) K = t + 1;
      }
    std::vector<int32_t> next(B * K, 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < K; ++t) {
        const int64_t position = prompt_lengths[b] + fed + t;
        if (position < int64_t(sequences[b].size())) next[b * K + t] = sequences[b][position];
      }
    if (K == 1)
      decoder.step(next.data());
    else
      decoder.extend(next.data(), K);
    check(fed + 1, K);
    fed += K;
    for (int64_t b = 0; b < B; ++b) EXPECT_EQ(decoder.next_position(b), prompt_lengths[b] + fed);
  }
}

}  // namespace sps::testing
