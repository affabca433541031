#include "eval/scoring.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace sps::eval {

Scoring scoring_from_name(const std::string& name) {
  if (name == "naive") return Scoring::naive;
  if (name == "shared") return Scoring::shared;
  fail("--scoring {}: expected naive or shared", name);
}

const char* scoring_name(Scoring scoring) { return scoring == Scoring::naive ? "naive" : "shared"; }

CutRequest cut_request(const Request& r, const ModelConfig& cfg) {
  const int64_t T = cfg.block_size, V = cfg.vocab_size;
  if (r.continuation.empty()) fail("a request has an empty continuation");
  CutRequest cut;
  cut.seq = r.context.empty() ? std::vector<int32_t>{int32_t(cfg.eos_token_id)} : r.context;
  cut.seq.insert(cut.seq.end(), r.continuation.begin(), r.continuation.end());
  for (int32_t id : cut.seq)
    if (id < 0 || id >= V) fail("token id {} is outside the model's vocabulary of {}", id, V);
  if (int64_t(cut.seq.size()) > T + 1) cut.seq.erase(cut.seq.begin(), cut.seq.end() - (T + 1));
  cut.scored = std::min<int64_t>(int64_t(r.continuation.size()), int64_t(cut.seq.size()) - 1);
  return cut;
}

template <typename T>
std::vector<Score> score_requests(Model<T>& model, const std::vector<Request>& requests,
                                  int64_t batch, Scoring scoring,
                                  const ProgressCallback& progress) {
  return scoring == Scoring::naive ? score_requests(model, requests, batch, progress)
                                   : score_requests_shared(model, requests, batch, progress);
}

template <typename T>
std::vector<Score> score_requests(Model<T>& model, const std::vector<Request>& requests,
                                  int64_t batch, const ProgressCallback& progress,
                                  int64_t logits_budget_bytes) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  const int32_t pad = int32_t(cfg.pad_token_id);
  SPS_ASSERT(batch >= 1);
  std::vector<CutRequest> rows(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) rows[i] = cut_request(requests[i], cfg);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].greedy != requests[b].greedy) return requests[a].greedy < requests[b].greedy;
    return rows[a].seq.size() > rows[b].seq.size();
  });
  std::vector<Score> scores(requests.size());
  std::vector<int32_t> x, y;
  std::vector<double> nll, logits;
  size_t done = 0;
  while (done < order.size()) {
    const size_t head = order[done];
    const int64_t L = int64_t(rows[head].seq.size()) - 1;
    const bool greedy = requests[head].greedy;
    int64_t b = std::min<int64_t>(batch, int64_t(order.size() - done));
    if (greedy) {
      const int64_t per_row = L * V * int64_t(sizeof(double));
      b = std::max<int64_t>(1, std::min<int64_t>(b, logits_budget_bytes / std::max<int64_t>(per_row, 1)));
      // a batch never mixes greedy and plain rows
    }
    for (int64_t r = 1; r < b; ++r)
      if (requests[order[done + size_t(r)]].greedy != greedy) {
        b = r;
        break;
      }
    x.assign(size_t(b * L), pad);
    y.assign(size_t(b * L), pad);
    nll.assign(size_t(b * L), 0.0);
    if (greedy) logits.assign(size_t(b * L * V), 0.0);
    for (int64_t r = 0; r < b; ++r) {
      const auto& seq = rows[order[done + size_t(r)]].seq;
      const int64_t n = int64_t(seq.size()) - 1, off = L - n;
      std::copy(seq.begin(), seq.end() - 1, x.begin() + r * L + off);
      std::copy(seq.begin() + 1, seq.end(), y.begin() + r * L + off);
    }
    ForwardOptions options;
    options.nll = nll.data();
    if (greedy) options.logits = logits.data();
    model.forward(x.data(), y.data(), b, L, options);
    for (int64_t r = 0; r < b; ++r) {
      const size_t i = order[done + size_t(r)];
      Score& s = scores[i];
      s.tokens = rows[i].scored;
      s.greedy = true;
      for (int64_t k = L - rows[i].scored; k < L; ++k) {
        s.loglik -= nll[size_t(r * L + k)];
        if (greedy) {
          const double* row = logits.data() + (r * L + k) * V;
          const int64_t target = y[size_t(r * L + k)];
          // argmax with the lowest id on ties; only real tokens (PREDICT, PAD never win
          // unless the model puts them first, which then counts as a miss)
          const int64_t best = std::max_element(row, row + V) - row;
          if (best != target && row[best] > row[target]) s.greedy = false;
        }
      }
      if (!greedy) s.greedy = false;
    }
    done += size_t(b);
    if (progress) progress(int64_t(done), int64_t(order.size()));
  }
  return scores;
}

template std::vector<Score> score_requests<float>(Model<float>&, const std::vector<Request>&,
                                                  int64_t, const ProgressCallback&, int64_t);
template std::vector<Score> score_requests<float>(Model<float>&, const std::vector<Request>&,
                                                  int64_t, Scoring, const ProgressCallback&);
template std::vector<Score> score_requests<double>(Model<double>&, const std::vector<Request>&,
                                                   int64_t, Scoring, const ProgressCallback&);
template std::vector<Score> score_requests<double>(Model<double>&, const std::vector<Request>&,
                                                   int64_t, const ProgressCallback&, int64_t);

}  // namespace sps::eval
