// Shared-context scoring (eval/scoring.h): one prefill per distinct prompt, then every
// request forks that row and feeds its scored tokens in one extend of the cached decoder.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "eval/scoring.h"
#include "model/decoder.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::eval {

namespace {

// The logits of one extend are bounded by this many bytes (at least one row).
constexpr int64_t kLogitsBudget = int64_t(256) << 20;

struct Plan {
  int64_t prompt = -1;           // index of its prompt (-1: scored naively)
  std::vector<int32_t> targets;  // the scored tokens; all but the last are fed
};

// Whether `target` is an argmax of the row (ties count, as in the naive scorer).
template <typename T>
bool is_argmax(const T* row, int64_t V, int32_t target) {
  return *std::max_element(row, row + V) <= row[target];
}

// Requests whose cut sequences agree before their scored tokens share a prompt. An extend
// ends a document at its last token, so requests that feed an EOS are scored naively.
struct SharedPlan {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Plan> plans;                 // per request
  std::vector<size_t> naive;               // requests scored by score_requests
  std::vector<std::vector<size_t>> users;  // per prompt, the requests that share it
  std::vector<int64_t> prompt_order;       // longest prompt first
};

SharedPlan plan_shared(const std::vector<Request>& requests, const ModelConfig& cfg) {
  SharedPlan s;
  s.plans.resize(requests.size());
  std::map<std::vector<int32_t>, int64_t> prompt_ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    CutRequest cut = cut_request(requests[i], cfg);
    const auto split = cut.seq.end() - cut.scored;
    if (std::find(split, cut.seq.end() - 1, int32_t(cfg.eos_token_id)) != cut.seq.end() - 1) {
      s.naive.push_back(i);
      continue;
    }
    std::vector<int32_t> prompt(cut.seq.begin(), split);
    const auto [it, added] = prompt_ids.try_emplace(prompt, int64_t(s.prompts.size()));
    if (added) s.prompts.push_back(std::move(prompt));
    s.plans[i].prompt = it->second;
    s.plans[i].targets.assign(split, cut.seq.end());
  }
  s.users.resize(s.prompts.size());
  for (size_t i = 0; i < s.plans.size(); ++i)
    if (s.plans[i].prompt >= 0) s.users[size_t(s.plans[i].prompt)].push_back(i);
  s.prompt_order.resize(s.prompts.size());
  std::iota(s.prompt_order.begin(), s.prompt_order.end(), int64_t(0));
  std::stable_sort(s.prompt_order.begin(), s.prompt_order.end(), [&](int64_t a, int64_t b) {
    return s.prompts[size_t(a)].size() > s.prompts[size_t(b)].size();
  });
  return s;
}

// Scores the shared requests chunk by chunk: a chunk of prompts whose caches fit the budget
// is prefilled, then its requests fork their prompt's row and extend it by their tokens.
template <typename T>
class SharedScorer {
 public:
  SharedScorer(Model<T>& model, const std::vector<Request>& requests, const SharedPlan& plan,
               int64_t batch, int64_t decode_rows, int64_t prompt_cache_bytes,
               std::vector<Score>& scores)
      : model_(model),
        cfg_(model.config()),
        requests_(requests),
        s_(plan),
        scores_(scores),
        V_(cfg_.vocab_size),
        pad_(int32_t(cfg_.pad_token_id)) {
    // The decoders are made once, for the longest prompt and continuation, and every chunk
    // reuses them (fresh ones per chunk spent ~5 % of the time zeroing new pages).
    const int64_t P_max = int64_t(s_.prompts[size_t(s_.prompt_order.front())].size());
    int64_t longest_feed = 0;
    for (const Plan& p : s_.plans)
      longest_feed = std::max(longest_feed, int64_t(p.targets.size()) - 1);
    const int64_t ring = cfg_.window_size > 0 ? cfg_.window_size : 0;
    const int64_t per_prompt =
        2 * cfg_.n_layer * cfg_.hidden_size * int64_t(sizeof(T)) * (P_max + std::min(ring, P_max));
    chunk_prompts_ = std::max(batch, prompt_cache_bytes / per_prompt / batch * batch);
    source_shape_.batch = std::min<int64_t>(batch, int64_t(s_.prompts.size()));
    source_shape_.max_prompt_tokens = P_max;
    const int64_t logits_per_row = std::max<int64_t>(1, longest_feed) * V_ * int64_t(sizeof(T));
    DecoderShape shape;
    shape.batch = std::max<int64_t>(1, std::min<int64_t>({decode_rows, int64_t(s_.plans.size()),
                                                         kLogitsBudget / logits_per_row}));
    shape.max_prompt_tokens = P_max;
    shape.max_new_tokens = longest_feed;
    shape.max_chunk_tokens = std::max<int64_t>(1, longest_feed);
    decoder_ = std::make_unique<Decoder<T>>(model, shape);
  }

  // `done` requests are scored already (the naive ones); progress counts on from there.
  void run(int64_t done, const ProgressCallback& progress) {
    for (size_t next = 0; next < s_.prompt_order.size();) {
      const size_t end = std::min(s_.prompt_order.size(), next + size_t(chunk_prompts_));
      prefill_chunk(next, end);
      // Every request of the chunk, longest continuation first, in groups of up to
      // decoder rows whose continuations are at least 3/4 as long as the group's first
      // (padding the rows to that length then costs at most a quarter; long continuations go
      // in small groups).
      chunk_requests_.clear();
      for (size_t g = next; g < end; ++g)
        for (size_t i : s_.users[size_t(s_.prompt_order[g])]) chunk_requests_.push_back(i);
      std::stable_sort(chunk_requests_.begin(), chunk_requests_.end(), [&](size_t a, size_t b) {
        return s_.plans[a].targets.size() > s_.plans[b].targets.size();
      });
      for (size_t first = 0; first < chunk_requests_.size();) {
        const int64_t rows = score_group(first);
        first += size_t(rows);
        done += rows;
        if (progress) progress(done, int64_t(requests_.size()));
      }
      next = end;
    }
  }

 private:
  // Prefills prompts [next, end) of prompt_order, `source_shape_.batch` rows per forward (a
  // short last group repeats its last prompt), and records each prompt's (decoder, row).
  void prefill_chunk(size_t next, size_t end) {
    source_of_.assign(s_.prompts.size(), {0, 0});
    size_t used = 0;
    for (size_t g = next; g < end; g += size_t(source_shape_.batch), ++used) {
      const int64_t rows = std::min<int64_t>(source_shape_.batch, int64_t(end - g));
      const int64_t P = int64_t(s_.prompts[size_t(s_.prompt_order[g])].size());
      tokens_.assign(size_t(source_shape_.batch * P), pad_);
      for (int64_t r = 0; r < source_shape_.batch; ++r) {
        const int64_t p = s_.prompt_order[g + size_t(std::min(r, rows - 1))];
        const auto& prompt = s_.prompts[size_t(p)];
        std::copy(prompt.begin(), prompt.end(),
                  tokens_.begin() + (r + 1) * P - int64_t(prompt.size()));
        if (r < rows) source_of_[size_t(p)] = {int64_t(used), r};
      }
      if (used == sources_.size())
        sources_.push_back(std::make_unique<Decoder<T>>(model_, source_shape_));
      sources_[used]->prefill(tokens_.data(), P);
    }
  }

  // The group of requests from chunk_requests_[first]: each row forks its prompt, scores
  // its first token from the prompt's logits, and feeds the others in one extend. Returns
  // the group's rows.
  int64_t score_group(size_t first) {
    const auto feed_length = [&](size_t k) {
      return int64_t(s_.plans[chunk_requests_[k]].targets.size()) - 1;
    };
    const int64_t K = feed_length(first);
    int64_t rows = 1;
    while (rows < decoder_->shape().batch && first + size_t(rows) < chunk_requests_.size() &&
           4 * feed_length(first + size_t(rows)) >= 3 * K)
      ++rows;
    group_.assign(chunk_requests_.begin() + first, chunk_requests_.begin() + first + rows);
    for (int64_t r = 0; r < rows; ++r) {
      const auto [d, row] = source_of_[size_t(s_.plans[group_[r]].prompt)];
      decoder_->fork(r, *sources_[size_t(d)], row);
    }
    for (size_t i : group_) {
      scores_[i].tokens = int64_t(s_.plans[i].targets.size());
      scores_[i].greedy = requests_[i].greedy;
    }
    add(decoder_->logits(), 1, 0);  // the first target, from the prompt's logits
    if (K > 0) {  // the others, from the logits of the targets before them
      feed_.assign(size_t(rows * K), pad_);
      for (int64_t r = 0; r < rows; ++r) {
        const auto& t = s_.plans[group_[r]].targets;
        std::copy(t.begin(), t.end() - 1, feed_.begin() + r * K);
      }
      decoder_->extend(feed_.data(), K, rows);
      add(decoder_->logits(), K, 1);
    }
    return rows;
  }

  // logits [rows, K, V]: position j of row r scores the row's target k0 + j (rows with
  // fewer targets are padded with PAD, and their padding is not counted).
  void add(const T* logits, int64_t K, int64_t k0) {
    const int64_t rows = int64_t(group_.size());
    targets_.assign(size_t(rows * K), pad_);
    for (int64_t r = 0; r < rows; ++r) {
      const auto& t = s_.plans[group_[r]].targets;
      for (int64_t j = 0; j < K && k0 + j < int64_t(t.size()); ++j)
        targets_[size_t(r * K + j)] = t[size_t(k0 + j)];
    }
    nll_.resize(targets_.size());
    lse_.resize(targets_.size());
    ops::cross_entropy_forward(nll_.data(), lse_.data(), logits, targets_.data(), rows * K, V_);
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = group_[r];
      const auto& t = s_.plans[i].targets;
      for (int64_t j = 0; j < K && k0 + j < int64_t(t.size()); ++j) {
        scores_[i].loglik -= double(nll_[size_t(r * K + j)]);
        if (requests_[i].greedy && !is_argmax(logits + (r * K + j) * V_, V_, t[size_t(k0 + j)]))
          scores_[i].greedy = false;
      }
    }
  }

  Model<T>& model_;
  const ModelConfig& cfg_;
  const std::vector<Request>& requests_;
  const SharedPlan& s_;
  std::vector<Score>& scores_;
  const int64_t V_;
  const int32_t pad_;
  int64_t chunk_prompts_ = 0;
  DecoderShape source_shape_;
  std::vector<std::unique_ptr<Decoder<T>>> sources_;  // one per prefill group of a chunk
  std::unique_ptr<Decoder<T>> decoder_;
  std::vector<std::pair<int64_t, int64_t>> source_of_;  // per prompt: (decoder, row)
  std::vector<size_t> chunk_requests_, group_;
  std::vector<int32_t> tokens_, feed_, targets_;
  std::vector<T> nll_, lse_;
};

}  // namespace

template <typename T>
std::vector<Score> score_requests_shared(Model<T>& model, const std::vector<Request>& requests,
                                         int64_t batch, const ProgressCallback& progress,
                                         int64_t decode_rows, int64_t prompt_cache_bytes) {
  SPS_ASSERT(batch >= 1 && decode_rows >= 0);
  if (decode_rows == 0) decode_rows = 4 * batch;
  const SharedPlan plan = plan_shared(requests, model.config());
  std::vector<Score> scores(requests.size());
  if (!plan.naive.empty()) {
    std::vector<Request> subset;
    for (size_t i : plan.naive) subset.push_back(requests[i]);
    const auto naive_scores = score_requests(model, subset, batch, [&](int64_t d, int64_t) {
      if (progress) progress(d, int64_t(requests.size()));
    });
    for (size_t k = 0; k < plan.naive.size(); ++k) scores[plan.naive[k]] = naive_scores[k];
  }
  if (plan.prompts.empty()) return scores;
  SharedScorer<T>(model, requests, plan, batch, decode_rows, prompt_cache_bytes, scores)
      .run(int64_t(plan.naive.size()), progress);
  return scores;
}

template std::vector<Score> score_requests_shared<float>(Model<float>&, const std::vector<Request>&,
                                                         int64_t, const ProgressCallback&, int64_t,
                                                         int64_t);
template std::vector<Score> score_requests_shared<double>(Model<double>&,
                                                          const std::vector<Request>&, int64_t,
                                                          const ProgressCallback&, int64_t,
                                                          int64_t);

}  // namespace sps::eval
