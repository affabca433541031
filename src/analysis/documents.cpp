#include "analysis/documents.h"

#include <algorithm>

#include "util/error.h"
#include "util/rng.h"

namespace sps::analysis {

namespace {

// Fisher–Yates with our deterministic generator, so a seed picks the same items everywhere.
void shuffle(std::vector<int64_t>& items, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

Sequences read_at(const TokenFile& file, const std::vector<int64_t>& starts, int64_t length,
                  int64_t count, int64_t vocab_size) {
  Sequences out;
  out.length = length;
  out.candidates = int64_t(starts.size());
  const int64_t n = std::min<int64_t>(count, int64_t(starts.size()));
  out.tokens.resize(size_t(n));
  for (int64_t k = 0; k < n; ++k) {
    out.tokens[size_t(k)].resize(size_t(length + 1));
    file.read(starts[size_t(k)], length + 1, out.tokens[size_t(k)].data(), vocab_size);
  }
  return out;
}

}  // namespace

Sequences sample_documents(const TokenFile& file, int64_t length, int64_t count, uint64_t seed,
                           int32_t eos_token_id, int64_t vocab_size) {
  SPS_ASSERT(length > 0 && count > 0);
  std::vector<int64_t> starts;
  int64_t begin = 0;
  for (int64_t i = 0; i < file.size(); ++i) {
    const bool last = i + 1 == file.size();
    if (int64_t(file.at(i)) == eos_token_id || last) {
      if (i + 1 - begin >= length + 1) starts.push_back(begin);
      begin = i + 1;
    }
  }
  shuffle(starts, seed);
  return read_at(file, starts, length, count, vocab_size);
}

Sequences sample_windows(const TokenFile& file, int64_t length, int64_t count, uint64_t seed,
                         int64_t vocab_size) {
  SPS_ASSERT(length > 0 && count > 0);
  std::vector<int64_t> starts;
  const int64_t span = file.size() - (length + 1);
  if (span >= 0) {
    Rng rng(seed);
    for (int64_t k = 0; k < count; ++k) starts.push_back(int64_t(rng.below(uint64_t(span) + 1)));
  }
  Sequences out = read_at(file, starts, length, count, vocab_size);
  out.candidates = span >= 0 ? span + 1 : 0;
  return out;
}

}  // namespace sps::analysis
