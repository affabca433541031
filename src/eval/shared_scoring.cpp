// Shared-context scoring (eval/scoring.h): one prefill per distinct prompt, then every
// request forks that row and feeds its scored tokens through cached decode steps.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "eval/scoring.h"
#include "model/decoder.h"
#include "util/error.h"

namespace sps::eval {

namespace {

// Prompt caches held at once are bounded by this many bytes (at least one prefill batch).
constexpr int64_t kPromptCacheBudget = int64_t(256) << 20;

struct Plan {
  int64_t prompt = 0;            // index of its prompt
  std::vector<int32_t> targets;  // the scored tokens; all but the last are fed
};

// Adds the log-probability of `target` under `logits` to the score, and clears the greedy
// flag unless the target is an argmax (the naive scorer's tie rule).
template <typename T>
void accumulate(Score& score, const T* logits, int64_t V, int32_t target, bool greedy) {
  const T top = *std::max_element(logits, logits + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - double(top));
  score.loglik += double(logits[target]) - double(top) - std::log(sum);
  if (greedy && logits[target] < top) score.greedy = false;
}

}  // namespace

template <typename T>
std::vector<Score> score_requests_shared(Model<T>& model, const std::vector<Request>& requests,
                                         int64_t batch, const Progress& progress,
                                         int64_t decode_rows) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  const int32_t pad = int32_t(cfg.pad_token_id);
  SPS_ASSERT(batch >= 1 && decode_rows >= 0);
  if (decode_rows == 0) decode_rows = 4 * batch;

  // Requests whose cut sequences agree before their scored tokens share a prompt.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Plan> plans(requests.size());
  {
    std::map<std::vector<int32_t>, int64_t> prompt_ids;
    for (size_t i = 0; i < requests.size(); ++i) {
      CutRequest cut = cut_request(requests[i], cfg);
      const auto split = cut.seq.end() - cut.scored;
      std::vector<int32_t> prompt(cut.seq.begin(), split);
      const auto [it, added] = prompt_ids.try_emplace(prompt, int64_t(prompts.size()));
      if (added) prompts.push_back(std::move(prompt));
      plans[i].prompt = it->second;
      plans[i].targets.assign(split, cut.seq.end());
    }
  }
  std::vector<std::vector<size_t>> users(prompts.size());
  for (size_t i = 0; i < plans.size(); ++i) users[size_t(plans[i].prompt)].push_back(i);
  std::vector<int64_t> prompt_order(prompts.size());
  std::iota(prompt_order.begin(), prompt_order.end(), int64_t(0));
  std::stable_sort(prompt_order.begin(), prompt_order.end(), [&](int64_t a, int64_t b) {
    return prompts[size_t(a)].size() > prompts[size_t(b)].size();
  });

  const int64_t ring = cfg.window_size > 0 ? cfg.window_size : 0;
  std::vector<Score> scores(requests.size());
  std::vector<int32_t> tokens, feed;
  int64_t done = 0;
  size_t next_prompt = 0;
  while (next_prompt < prompt_order.size()) {
    // A chunk of prompts whose caches fit the budget, prefilled `batch` per forward.
    const int64_t P_max = int64_t(prompts[size_t(prompt_order[next_prompt])].size());
    const int64_t per_prompt = 2 * cfg.n_layer * cfg.hidden_size * int64_t(sizeof(T)) *
                               (P_max + std::min(ring, P_max));
    const int64_t chunk_prompts = std::max(batch, kPromptCacheBudget / per_prompt / batch * batch);
    const size_t chunk_end = std::min(prompt_order.size(), next_prompt + size_t(chunk_prompts));
    std::vector<std::unique_ptr<Decoder<T>>> sources;
    std::vector<std::pair<int64_t, int64_t>> source_of(prompts.size());  // (decoder, row)
    for (size_t g = next_prompt; g < chunk_end; g += size_t(batch)) {
      const size_t g_end = std::min(chunk_end, g + size_t(batch));
      const int64_t rows = int64_t(g_end - g);
      const int64_t P = int64_t(prompts[size_t(prompt_order[g])].size());
      tokens.assign(size_t(rows * P), pad);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = prompt_order[g + size_t(r)];
        const auto& prompt = prompts[size_t(p)];
        std::copy(prompt.begin(), prompt.end(), tokens.begin() + (r + 1) * P - int64_t(prompt.size()));
        source_of[size_t(p)] = {int64_t(sources.size()), r};
      }
      DecoderShape shape;
      shape.batch = rows;
      shape.max_prompt_tokens = P;
      sources.push_back(std::make_unique<Decoder<T>>(model, shape));
      sources.back()->prefill(tokens.data(), P);
    }

    // Every request of the chunk, longest continuation first, decoded `decode_rows` at once.
    std::vector<size_t> chunk_requests;
    for (size_t g = next_prompt; g < chunk_end; ++g)
      for (size_t i : users[size_t(prompt_order[g])]) chunk_requests.push_back(i);
    std::stable_sort(chunk_requests.begin(), chunk_requests.end(), [&](size_t a, size_t b) {
      return plans[a].targets.size() > plans[b].targets.size();
    });
    DecoderShape shape;
    shape.batch = std::min<int64_t>(decode_rows, int64_t(chunk_requests.size()));
    shape.max_prompt_tokens = P_max;
    shape.max_new_tokens = int64_t(plans[chunk_requests.front()].targets.size()) - 1;
    Decoder<T> decoder(model, shape);
    feed.assign(size_t(shape.batch), pad);
    for (size_t first = 0; first < chunk_requests.size(); first += size_t(shape.batch)) {
      const int64_t rows = std::min<int64_t>(shape.batch, int64_t(chunk_requests.size() - first));
      // Rows past the last request repeat its fork; their logits are never read.
      const auto request_at = [&](int64_t r) { return chunk_requests[first + size_t(std::min(r, rows - 1))]; };
      for (int64_t r = 0; r < shape.batch; ++r) {
        const auto [d, row] = source_of[size_t(plans[request_at(r)].prompt)];
        decoder.fork(r, *sources[size_t(d)], row);
      }
      for (int64_t r = 0; r < rows; ++r) {
        Score& s = scores[request_at(r)];
        s.tokens = int64_t(plans[request_at(r)].targets.size());
        s.greedy = requests[request_at(r)].greedy;
      }
      const int64_t steps = int64_t(plans[request_at(0)].targets.size());
      for (int64_t k = 0; k < steps; ++k) {
        if (k > 0) decoder.step(feed.data());
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          const size_t i = request_at(r);
          const auto& targets = plans[i].targets;
          if (k < int64_t(targets.size()))
            accumulate(scores[i], decoder.logits() + r * V, V, targets[size_t(k)], requests[i].greedy);
        }
        for (int64_t r = 0; r < shape.batch; ++r) {
          const auto& targets = plans[request_at(r)].targets;
          feed[size_t(r)] = k < int64_t(targets.size()) ? targets[size_t(k)] : pad;
        }
      }
      done += rows;
      if (progress) progress(done, int64_t(requests.size()));
    }
    next_prompt = chunk_end;
  }
  return scores;
}

template std::vector<Score> score_requests_shared<float>(Model<float>&, const std::vector<Request>&,
                                                         int64_t, const Progress&, int64_t);
template std::vector<Score> score_requests_shared<double>(Model<double>&,
                                                          const std::vector<Request>&, int64_t,
                                                          const Progress&, int64_t);

}  // namespace sps::eval
