#include "infer/token_logprob.h"

#include <algorithm>
#include <cmath>

namespace sps {

TokenLogprob token_logprob(const float* logits, int64_t V, int32_t id, int64_t top,
                           int64_t visible_ids) {
  double max_logit = logits[0];
  for (int64_t v = 1; v < V; ++v) max_logit = std::max(max_logit, double(logits[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - max_logit);
  const double log_z = max_logit + std::log(sum);
  TokenLogprob t;
  t.id = id;
  t.logprob = double(logits[id]) - log_z;
  if (top > 0) {
    std::vector<int32_t> ids(size_t(std::min(visible_ids, V)));
    for (size_t v = 0; v < ids.size(); ++v) ids[v] = int32_t(v);
    const int64_t k = std::min<int64_t>(top, int64_t(ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int64_t j = 0; j < k; ++j) t.top.emplace_back(ids[j], double(logits[ids[j]]) - log_z);
  }
  return t;
}

}  // namespace sps
