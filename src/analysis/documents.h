#pragma once
// The token sequences the analyses run on (docs/model.md §9): the first `length` + 1 tokens of
// documents of a token file that are long enough, so every input and its target lie in one
// document, or windows of the packed stream at seeded random starts.
#include <cstdint>
#include <vector>

#include "data/token_file.h"

namespace sps::analysis {

struct Sequences {
  std::vector<std::vector<int32_t>> tokens;  // each length + 1: x = [0, length), y = [1, length]
  int64_t length = 0;
  int64_t candidates = 0;  // documents long enough (or window starts), before choosing
};

// Up to `count` documents (EOS-delimited, the EOS belongs to the document it ends) with at
// least length + 1 tokens, chosen by a seeded shuffle; each cut to its first length + 1
// tokens. Fewer are returned when fewer qualify. Ids are checked against the vocabulary.
Sequences sample_documents(const TokenFile& file, int64_t length, int64_t count, uint64_t seed,
                           int32_t eos_token_id, int64_t vocab_size);

// `count` windows of length + 1 tokens at seeded uniform starts (they may span documents).
Sequences sample_windows(const TokenFile& file, int64_t length, int64_t count, uint64_t seed,
                         int64_t vocab_size);

}  // namespace sps::analysis
