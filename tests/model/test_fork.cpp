// Forking a prefilled row (Decoder::fork, KvCache::copy_sequence): a row forked from another
// decoder continues exactly as a row that prefilled the same prompt itself, for every family
// and window (w = 0, w < prompt, w ≥ T), with an EOS inside a prompt and one ending it.
#include <gtest/gtest.h>

#include <vector>

#include "gradcheck.h"
#include "model/decoder.h"
#include "model/model_fixtures.h"

namespace sps::testing {
namespace {

// Left-pads each prompt to the longest.
std::vector<int32_t> padded(const std::vector<std::vector<int32_t>>& prompts, int32_t pad,
                            int64_t& P) {
  P = 0;
  for (const auto& p : prompts) P = std::max<int64_t>(P, int64_t(p.size()));
  std::vector<int32_t> out;
  for (const auto& p : prompts) {
    out.insert(out.end(), size_t(P) - p.size(), pad);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

TEST(DecoderFork, ForkedRowsContinueAsIfTheyHadPrefilled) {
  for (const std::string& family : model_families())
    for (int64_t w : {0, 2, 20}) {
      const ModelConfig c = micro_config(family, w);
      Model<float> model(c);
      randomize_weights(model, 8);
      const int32_t eos = int32_t(c.eos_token_id);
      const std::vector<std::vector<int32_t>> prompts = {
          {5, 9, eos, 3, 7, 11, 2}, {4, 8, eos}, {6}};
      // The source prefills the three prompts; the target forks them into rows in another
      // order (one twice) and with more capacity.
      int64_t P = 0;
      const auto source_tokens = padded(prompts, int32_t(c.pad_token_id), P);
      DecoderShape source_shape;
      source_shape.batch = 3;
      source_shape.max_prompt_tokens = P;
      Decoder<float> source(model, source_shape);
      source.prefill(source_tokens.data(), P);

      const std::vector<int64_t> from = {2, 0, 1, 0};
      const int64_t steps = 4;
      DecoderShape shape;
      shape.batch = 4;
      shape.max_prompt_tokens = P + 1;
      shape.max_new_tokens = steps;
      Decoder<float> forked(model, shape);
      for (int64_t r = 0; r < 4; ++r) forked.fork(r, source, from[size_t(r)]);

      std::vector<std::vector<int32_t>> reordered;
      for (int64_t s : from) reordered.push_back(prompts[size_t(s)]);
      int64_t P2 = 0;
      const auto direct_tokens = padded(reordered, int32_t(c.pad_token_id), P2);
      DecoderShape direct_shape = shape;
      direct_shape.max_prompt_tokens = P2;
      Decoder<float> direct(model, direct_shape);
      direct.prefill(direct_tokens.data(), P2);

      const std::vector<std::vector<int32_t>> feeds = {
          {1, 2, 3, 4}, {10, eos, 12, 13}, {20, 21, 22, 23}, {30, 31, 32, 33}};
      for (int64_t k = 0; k <= steps; ++k) {
        for (int64_t r = 0; r < 4; ++r) {
          EXPECT_EQ(forked.next_position(r), direct.next_position(r));
          EXPECT_LT(max_relative_error(forked.logits() + r * c.vocab_size,
                                       direct.logits() + r * c.vocab_size, c.vocab_size),
                    1e-5)
              << family << " w=" << w << " row " << r << " step " << k;
        }
        if (k == steps) break;
        std::vector<int32_t> next;
        for (const auto& f : feeds) next.push_back(f[size_t(k)]);
        forked.step(next.data());
        direct.step(next.data());
      }
    }
}

}  // namespace
}  // namespace sps::testing
