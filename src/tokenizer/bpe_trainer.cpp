#include "tokenizer/bpe_trainer.h"

#include <fnmatch.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps {

struct PieceCounter::Matching {
  PreTokenizer pre;
  PreTokenizer::Matcher matcher{pre};
};

size_t PieceCounter::Hash::operator()(std::string_view s) const {
  return std::hash<std::string_view>{}(s);
}

PieceCounter::PieceCounter() : matching_(std::make_unique<Matching>()) {}
PieceCounter::~PieceCounter() = default;
PieceCounter::PieceCounter(PieceCounter&&) noexcept = default;
PieceCounter& PieceCounter::operator=(PieceCounter&&) noexcept = default;

void PieceCounter::add_document(std::string_view text) {
  std::string_view valid = text;
  stats_.bytes += text.size();
  if (find_invalid_utf8(text) != std::string_view::npos) {
    repaired_.clear();
    stats_.replacements += append_repaired_utf8(text, repaired_);
    valid = repaired_;
  }
  matching_->matcher.split(valid, [&](std::string_view piece) {
    auto it = counts_.find(piece);
    if (it == counts_.end()) it = counts_.emplace(std::string(piece), 0).first;
    ++it->second;
  });
}

void PieceCounter::merge(PieceCounter&& other) {
  if (counts_.empty()) {
    counts_ = std::move(other.counts_);
  } else {
    for (auto& [piece, count] : other.counts_) counts_[piece] += count;
  }
  stats_ += other.stats_;
  other.counts_.clear();
}

namespace {

using Pair = uint64_t;  // left id << 32 | right id

Pair make_pair_key(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

struct Word {
  std::vector<uint32_t> symbols;
  uint64_t count;
};

struct Candidate {
  uint64_t count;
  Pair pair;
  // Max-heap order: larger count first, then the smaller pair.
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

// Words in byte order, so ids (and with them every tie) do not depend on hashing.
std::vector<Word> words_in_byte_order(const PieceCounter& pieces) {
  std::vector<const std::pair<const std::string, uint64_t>*> sorted;
  sorted.reserve(pieces.counts().size());
  for (const auto& entry : pieces.counts())
    if (entry.first.size() > 1) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto* entry : sorted) {
    Word w{{}, entry->second};
    w.symbols.reserve(entry->first.size());
    for (unsigned char c : entry->first) w.symbols.push_back(c);
    words.push_back(std::move(w));
  }
  return words;
}

// The words as symbol sequences, how often each adjacent pair occurs, the words each pair
// occurs in, and a max-heap of pairs by count whose stale entries are skipped as they
// surface (counts only fall, except for the pairs a merge makes, which are pushed anew).
class PairIndex {
 public:
  explicit PairIndex(std::vector<Word> words) : words_(std::move(words)) {
    for (uint32_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w].symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const Pair p = make_pair_key(s[i], s[i + 1]);
        pair_count_[p] += words_[w].count;
        auto& list = words_with_[p];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    }
    for (const auto& [p, c] : pair_count_) heap_.push(Candidate{c, p});
    visited_.assign(words_.size(), UINT32_MAX);
  }

  // The most frequent pair (ties: the smaller pair); false when no pair is left.
  bool pop_best(Pair& pair) {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      const uint64_t actual = pair_count_[top.pair];
      if (actual != top.count) {  // stale entry
        if (actual > 0) heap_.push(Candidate{actual, top.pair});
        continue;
      }
      if (actual == 0) continue;
      pair = top.pair;
      return true;
    }
    return false;
  }

  // Replaces every occurrence of `pair` in the words that hold it by `merged`, left to
  // right, and updates the counts and the heap.
  void merge(Pair pair, uint32_t merged) {
    const uint32_t left = static_cast<uint32_t>(pair >> 32);
    const uint32_t right = static_cast<uint32_t>(pair & 0xFFFFFFFFu);
    ++step_;
    grown_.clear();
    std::vector<uint32_t> affected = std::move(words_with_[pair]);
    words_with_.erase(pair);
    for (uint32_t w : affected) {
      if (visited_[w] == step_) continue;
      visited_[w] = step_;
      auto& s = words_[w].symbols;
      const uint64_t count = words_[w].count;
      bool present = false;
      for (size_t i = 0; i + 1 < s.size(); ++i)
        if (s[i] == left && s[i + 1] == right) present = true;
      if (!present) continue;
      // Take the word's pairs out, merge left to right, put its pairs back.
      for (size_t i = 0; i + 1 < s.size(); ++i) pair_count_[make_pair_key(s[i], s[i + 1])] -= count;
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          s[out++] = merged;
          ++i;
        } else {
          s[out++] = s[i];
        }
      }
      s.resize(out);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const Pair p = make_pair_key(s[i], s[i + 1]);
        pair_count_[p] += count;
        if (s[i] == merged || s[i + 1] == merged) {
          auto& list = words_with_[p];
          if (list.empty() || list.back() != w) list.push_back(w);
          grown_.push_back(p);
        }
      }
    }
    std::sort(grown_.begin(), grown_.end());
    grown_.erase(std::unique(grown_.begin(), grown_.end()), grown_.end());
    for (Pair p : grown_) heap_.push(Candidate{pair_count_[p], p});
  }

 private:
  std::vector<Word> words_;
  std::unordered_map<Pair, uint64_t> pair_count_;
  std::unordered_map<Pair, std::vector<uint32_t>> words_with_;  // may hold stale word ids
  std::priority_queue<Candidate> heap_;
  std::vector<uint32_t> visited_;  // the merge step that last saw each word
  std::vector<Pair> grown_;        // pairs with the merged token, to (re)enter the heap
  uint32_t step_ = 0;
};

}  // namespace

std::vector<std::string> train_bpe(const PieceCounter& pieces, uint32_t vocab_size,
                                   const ProgressCallback& progress) {
  if (vocab_size < 257 + 1)
    fail("vocabulary size {} is too small: a byte-level BPE has 256 byte tokens and an "
         "end-of-text token, so at least 258", vocab_size);
  const uint32_t ranks_wanted = vocab_size - 1;  // the last id is end-of-text
  const uint32_t merges_wanted = ranks_wanted - 256;

  PairIndex index(words_in_byte_order(pieces));
  std::vector<std::string> tokens(256);
  std::unordered_map<std::string, uint32_t> id_of;  // token bytes -> id
  for (int b = 0; b < 256; ++b) {
    tokens[b] = std::string(1, static_cast<char>(b));
    id_of.emplace(tokens[b], b);
  }
  uint32_t merges_done = 0;
  const uint32_t report_every = std::max<uint32_t>(1, merges_wanted / 100);
  while (tokens.size() < ranks_wanted) {
    Pair pair;
    if (!index.pop_best(pair))
      fail("the training text is too small for a vocabulary of {}: it ran out of pairs to "
           "merge after {} tokens", vocab_size, tokens.size());
    std::string bytes = tokens[pair >> 32] + tokens[pair & 0xFFFFFFFFu];
    uint32_t merged;
    if (auto it = id_of.find(bytes); it != id_of.end()) {
      merged = it->second;
    } else {
      merged = static_cast<uint32_t>(tokens.size());
      id_of.emplace(bytes, merged);
      tokens.push_back(std::move(bytes));
      ++merges_done;
    }
    index.merge(pair, merged);
    if (progress && merges_done % report_every == 0) progress(merges_done, merges_wanted);
  }
  if (progress) progress(merges_done, merges_wanted);
  return tokens;
}

std::vector<std::string> collect_text_files(const std::vector<std::string>& inputs,
                                            const std::vector<std::string>& include_globs) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status status = fs::status(input, ec);
    if (ec || !fs::exists(status)) fail("{}: no such file or folder", input);
    if (!fs::is_directory(status)) {
      files.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(input, fs::directory_options::follow_directory_symlink, ec);
    if (ec) fail("{}: cannot list the folder ({})", input, ec.message());
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) fail("{}: cannot list the folder ({})", input, ec.message());
      if (!it->is_regular_file(ec)) continue;
      const std::string name = it->path().filename().string();
      bool keep = include_globs.empty();
      for (const auto& glob : include_globs)
        keep = keep || fnmatch(glob.c_str(), name.c_str(), 0) == 0;
      if (keep) found.push_back(it->path().string());
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::vector<std::string> train_bpe_on_files(
    const std::vector<std::string>& files, uint32_t vocab_size, int threads, TrainReport* report,
    const std::function<void(size_t, size_t, size_t)>& count_progress,
    const ProgressCallback& merge_progress) {
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(1, files.size()))));
  std::vector<PieceCounter> counters(threads);
  std::atomic<size_t> next{0}, done{0}, bytes{0};
  std::mutex error_mutex, progress_mutex;
  std::string error;
  auto work = [&](int t) {
    std::string text;
    for (size_t i = next++; i < files.size(); i = next++) {
      try {
        text = read_file(files[i], "training text");
      } catch (const UserError& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error.empty()) error = e.what();
        next = files.size();
        return;
      }
      counters[t].add_document(text);
      bytes += text.size();
      const size_t finished = ++done;
      if (count_progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        count_progress(finished, files.size(), bytes.load());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  if (!error.empty()) throw UserError(error);
  for (int t = 1; t < threads; ++t) counters[0].merge(std::move(counters[t]));
  if (report) {
    report->files = files.size();
    report->distinct_pieces = counters[0].distinct_pieces();
    report->stats = counters[0].stats();
  }
  return train_bpe(counters[0], vocab_size, merge_progress);
}

}  // namespace sps
