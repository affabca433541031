#pragma once
// Byte-level BPE training with GPT-2's pre-tokenizer.
//
// Documents are repaired to UTF-8 (U+FFFD, as in encoding), cut into pieces by the
// pre-tokenizer, and the pieces counted. Training starts from the 256 single bytes (rank b
// = byte b) and repeatedly merges the most frequent adjacent pair of tokens inside pieces
// (weighted by piece counts); ties go to the pair with the smaller (left id, right id). The
// new token gets the next rank. A pair whose bytes already form a token is merged into that
// token without adding a rank. Training stops when vocab_size - 1 ranks exist (the last id,
// vocab_size - 1, is the end-of-text token) and fails with UserError when the text has too
// few distinct pairs to get there. The result is the same for the same text whatever the
// thread count or document order.
//
// The output is a tiktoken rank file (see bpe.h), loadable with `--tokenizer PATH`.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "util/progress.h"

namespace sps {

// Counts of pre-tokenizer pieces over many documents. Not thread-safe: use one per thread
// and merge().
class PieceCounter {
 public:
  PieceCounter();
  ~PieceCounter();
  PieceCounter(PieceCounter&&) noexcept;
  PieceCounter& operator=(PieceCounter&&) noexcept;

  void add_document(std::string_view text);
  void merge(PieceCounter&& other);

  const EncodeStats& stats() const { return stats_; }  // bytes and replacements seen
  size_t distinct_pieces() const { return counts_.size(); }

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  using Counts = std::unordered_map<std::string, uint64_t, Hash, std::equal_to<>>;
  const Counts& counts() const { return counts_; }

 private:
  struct Matching;
  std::unique_ptr<Matching> matching_;
  Counts counts_;
  std::string repaired_;
  EncodeStats stats_;
};

// The tokens by rank (vocab_size - 1 of them; ranks 0..255 are the bytes). `progress` gets
// (merges done, merges wanted) now and then.
std::vector<std::string> train_bpe(const PieceCounter& pieces, uint32_t vocab_size,
                                   const ProgressCallback& progress = {});

// The regular files under `inputs` (files as given; folders recursively, keeping the files
// whose name matches one of `include_globs`, all when empty), sorted within each input.
// A missing input raises UserError.
std::vector<std::string> collect_text_files(const std::vector<std::string>& inputs,
                                            const std::vector<std::string>& include_globs);

struct TrainReport {
  size_t files = 0;
  size_t distinct_pieces = 0;
  EncodeStats stats;  // bytes read, U+FFFD replacements
};

// Counts pieces of every file (one document each) on `threads` threads, then trains.
// count_progress(files_done, files_total, bytes_done) is called now and then.
std::vector<std::string> train_bpe_on_files(
    const std::vector<std::string>& files, uint32_t vocab_size, int threads,
    TrainReport* report = nullptr,
    const std::function<void(size_t, size_t, size_t)>& count_progress = {},
    const ProgressCallback& merge_progress = {});

}  // namespace sps
