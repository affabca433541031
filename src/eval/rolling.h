#pragma once
// Rolling log-likelihood of whole documents (docs/model.md §8) and the corpus numbers built on it.
//
// A document of n tokens is cut into non-overlapping scoring windows of `context` (T)
// tokens. The first window predicts tokens [0, e) with e = min(T, n) from [EOS] +
// tokens[0, e − 1); every later window predicting [s, e) (e = min(s + T, n)) reads the T
// inputs tokens[e − 1 − T, e − 1), of which only the last e − s predictions are scored.
// Every token is scored exactly once; a document's log-likelihood is the sum. Windows of
// all documents are batched; a short first window is left-padded with PAD (docs/model.md §4).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "util/progress.h"

namespace sps::eval {

struct RollingWindow {
  int64_t start = 0;   // first scored document token
  int64_t end = 0;     // one past the last scored document token
  int64_t length = 0;  // input length: e for the first window, T for the others
  // Input k (0 ≤ k < length) is document token end − 1 − length + k, or EOS where that is −1;
  // the target of input k is document token end − length + k.
};

// The windows of a document of n tokens (none when n = 0).
std::vector<RollingWindow> rolling_windows(int64_t n, int64_t context);

// Summed natural-log likelihood of every document (0 for an empty one). `context` ≤ the
// model's block_size; `batch` rows per forward; `progress` gets (windows done, windows total)
// after every batch.
template <typename T>
std::vector<double> rolling_logliks(Model<T>& model, const std::vector<std::vector<int32_t>>& docs,
                                    int64_t context, int64_t batch,
                                    const ProgressCallback& progress = {});

// Pieces of Python's re.split(r"\s+", text): the number of maximal runs of white space
// (Python's str.isspace set, UTF-8 decoded) plus one. So "" counts 1, " a" counts 2 (an
// empty first piece), "a b\t" counts 3 (an empty last piece).
int64_t whitespace_words(std::string_view text);

// Pooled corpus numbers.
struct CorpusScore {
  int64_t documents = 0, tokens = 0, words = 0, bytes = 0;
  double loglik = 0;  // Σ over documents, nats
  double nats_per_word() const { return words > 0 ? -loglik / double(words) : 0; }
  double nll_per_token() const { return tokens > 0 ? -loglik / double(tokens) : 0; }
  double bits_per_byte() const;
};

}  // namespace sps::eval
