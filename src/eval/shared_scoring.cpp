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

}  // namespace

template <typename T>
std::vector<Score> score_requests_shared(Model<T>& model, const std::vector<Request>& requests,
                                         int64_t batch, const ProgressCallback& progress,
                                         int64_t decode_rows, int64_t prompt_cache_bytes) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  const int32_t pad = int32_t(cfg.pad_token_id);
  SPS_ASSERT(batch >= 1 && decode_rows >= 0);
  if (decode_rows == 0) decode_rows = 4 * batch;

  // Requests whose cut sequences agree before their scored tokens share a prompt. An extend
  // ends a document at its last token, so requests that feed an EOS are scored naively.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Plan> plans(requests.size());
  std::vector<size_t> naive;
  {
    std::map<std::vector<int32_t>, int64_t> prompt_ids;
    for (size_t i = 0; i < requests.size(); ++i) {
      CutRequest cut = cut_request(requests[i], cfg);
      const auto split = cut.seq.end() - cut.scored;
      if (std::find(split, cut.seq.end() - 1, int32_t(cfg.eos_token_id)) != cut.seq.end() - 1) {
        naive.push_back(i);
        continue;
      }
      std::vector<int32_t> prompt(cut.seq.begin(), split);
      const auto [it, added] = prompt_ids.try_emplace(prompt, int64_t(prompts.size()));
      if (added) prompts.push_back(std::move(prompt));
      plans[i].prompt = it->second;
      plans[i].targets.assign(split, cut.seq.end());
    }
  }
  std::vector<Score> scores(requests.size());
  int64_t done = 0;
  if (!naive.empty()) {
    std::vector<Request> subset;
    for (size_t i : naive) subset.push_back(requests[i]);
    const auto naive_scores = score_requests(model, subset, batch, [&](int64_t d, int64_t) {
      if (progress) progress(d, int64_t(requests.size()));
    });
    for (size_t k = 0; k < naive.size(); ++k) scores[naive[k]] = naive_scores[k];
    done = int64_t(naive.size());
  }
  std::vector<std::vector<size_t>> users(prompts.size());
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].prompt >= 0) users[size_t(plans[i].prompt)].push_back(i);
  std::vector<int64_t> prompt_order(prompts.size());
  std::iota(prompt_order.begin(), prompt_order.end(), int64_t(0));
  std::stable_sort(prompt_order.begin(), prompt_order.end(), [&](int64_t a, int64_t b) {
    return prompts[size_t(a)].size() > prompts[size_t(b)].size();
  });

  if (prompts.empty()) return scores;

  // The decoders are made once, for the longest prompt and continuation, and every chunk
  // reuses them (fresh ones per chunk spent ~5 % of the time zeroing new pages).
  const int64_t P_max = int64_t(prompts[size_t(prompt_order.front())].size());
  int64_t longest_feed = 0;
  for (const Plan& plan : plans) longest_feed = std::max(longest_feed, int64_t(plan.targets.size()) - 1);
  const int64_t ring = cfg.window_size > 0 ? cfg.window_size : 0;
  const int64_t per_prompt =
      2 * cfg.n_layer * cfg.hidden_size * int64_t(sizeof(T)) * (P_max + std::min(ring, P_max));
  const int64_t chunk_prompts = std::max(batch, prompt_cache_bytes / per_prompt / batch * batch);
  DecoderShape source_shape;
  source_shape.batch = std::min<int64_t>(batch, int64_t(prompts.size()));
  source_shape.max_prompt_tokens = P_max;
  std::vector<std::unique_ptr<Decoder<T>>> sources;  // one per prefill group of a chunk

  const int64_t logits_per_row = std::max<int64_t>(1, longest_feed) * V * int64_t(sizeof(T));
  DecoderShape shape;
  shape.batch = std::max<int64_t>(1, std::min<int64_t>({decode_rows, int64_t(plans.size()),
                                                       kLogitsBudget / logits_per_row}));
  shape.max_prompt_tokens = P_max;
  shape.max_new_tokens = longest_feed;
  shape.max_chunk_tokens = std::max<int64_t>(1, longest_feed);
  Decoder<T> decoder(model, shape);

  std::vector<int32_t> tokens, feed, targets;
  std::vector<T> nll, lse;
  size_t next_prompt = 0;
  while (next_prompt < prompt_order.size()) {
    // A chunk of prompts whose caches fit the budget, prefilled `source_shape.batch` rows per
    // forward (a short last group repeats its last prompt).
    const size_t chunk_end = std::min(prompt_order.size(), next_prompt + size_t(chunk_prompts));
    std::vector<std::pair<int64_t, int64_t>> source_of(prompts.size());  // (decoder, row)
    size_t used = 0;
    for (size_t g = next_prompt; g < chunk_end; g += size_t(source_shape.batch), ++used) {
      const int64_t rows = std::min<int64_t>(source_shape.batch, int64_t(chunk_end - g));
      const int64_t P = int64_t(prompts[size_t(prompt_order[g])].size());
      tokens.assign(size_t(source_shape.batch * P), pad);
      for (int64_t r = 0; r < source_shape.batch; ++r) {
        const int64_t p = prompt_order[g + size_t(std::min(r, rows - 1))];
        const auto& prompt = prompts[size_t(p)];
        std::copy(prompt.begin(), prompt.end(), tokens.begin() + (r + 1) * P - int64_t(prompt.size()));
        if (r < rows) source_of[size_t(p)] = {int64_t(used), r};
      }
      if (used == sources.size()) sources.push_back(std::make_unique<Decoder<T>>(model, source_shape));
      sources[used]->prefill(tokens.data(), P);
    }

    // Every request of the chunk, longest continuation first, in groups of up to
    // `shape.batch` rows whose continuations are at least 3/4 as long as the group's first
    // (padding the rows to that length then costs at most a quarter; long continuations go
    // in small groups). Each row forks its prompt, scores its first token from the prompt's
    // logits, and feeds the others in one extend.
    std::vector<size_t> chunk_requests;
    for (size_t g = next_prompt; g < chunk_end; ++g)
      for (size_t i : users[size_t(prompt_order[g])]) chunk_requests.push_back(i);
    std::stable_sort(chunk_requests.begin(), chunk_requests.end(), [&](size_t a, size_t b) {
      return plans[a].targets.size() > plans[b].targets.size();
    });
    int64_t rows = 0;
    for (size_t first = 0; first < chunk_requests.size(); first += size_t(rows)) {
      const auto feed_length = [&](size_t k) { return int64_t(plans[chunk_requests[k]].targets.size()) - 1; };
      const int64_t K = feed_length(first);
      rows = 1;
      while (rows < shape.batch && first + size_t(rows) < chunk_requests.size() &&
             4 * feed_length(first + size_t(rows)) >= 3 * K)
        ++rows;
      const auto request_at = [&](int64_t r) { return chunk_requests[first + size_t(r)]; };
      for (int64_t r = 0; r < rows; ++r) {
        const auto [d, row] = source_of[size_t(plans[request_at(r)].prompt)];
        decoder.fork(r, *sources[size_t(d)], row);
      }
      // logits [rows, K, V]: position j of row r scores the row's target k0 + j (rows with
      // fewer targets are padded with PAD, and their padding is not counted).
      const auto add = [&](const T* logits, int64_t K, int64_t k0) {
        targets.assign(size_t(rows * K), pad);
        for (int64_t r = 0; r < rows; ++r) {
          const auto& t = plans[request_at(r)].targets;
          for (int64_t j = 0; j < K && k0 + j < int64_t(t.size()); ++j) targets[size_t(r * K + j)] = t[size_t(k0 + j)];
        }
        nll.resize(targets.size());
        lse.resize(targets.size());
        ops::cross_entropy_forward(nll.data(), lse.data(), logits, targets.data(), rows * K, V);
        for (int64_t r = 0; r < rows; ++r) {
          const size_t i = request_at(r);
          const auto& t = plans[i].targets;
          for (int64_t j = 0; j < K && k0 + j < int64_t(t.size()); ++j) {
            scores[i].loglik -= double(nll[size_t(r * K + j)]);
            if (requests[i].greedy && !is_argmax(logits + (r * K + j) * V, V, t[size_t(k0 + j)]))
              scores[i].greedy = false;
          }
        }
      };
      for (int64_t r = 0; r < rows; ++r) {
        Score& s = scores[request_at(r)];
        s.tokens = int64_t(plans[request_at(r)].targets.size());
        s.greedy = requests[request_at(r)].greedy;
      }
      add(decoder.logits(), 1, 0);  // the first target, from the prompt's logits
      if (K > 0) {  // the others, from the logits of the targets before them
        feed.assign(size_t(rows * K), pad);
        for (int64_t r = 0; r < rows; ++r) {
          const auto& t = plans[request_at(r)].targets;
          std::copy(t.begin(), t.end() - 1, feed.begin() + r * K);
        }
        decoder.extend(feed.data(), K, rows);
        add(decoder.logits(), K, 1);
      }
      done += rows;
      if (progress) progress(done, int64_t(requests.size()));
    }
    next_prompt = chunk_end;
  }
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
