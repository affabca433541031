// The k most likely ids of each row on the CPU: the reference order every backend gives
// (largest value first, the lower id on a tie). Greedy choice (k = 1) is one scan in id order
// in which a later id takes over only when strictly larger.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {

template <typename T>
void top_k_rows(int32_t* ids, T* values, int32_t* first_nonfinite, const T* x, int64_t rows,
                int64_t n, const uint8_t* banned, int64_t k) {
  SPS_ASSERT(k >= 1 && k <= kMaxTopK);
  thread_local std::vector<int32_t> candidates;  // reused: a decoder calls this every step
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    int32_t* row_ids = ids + r * k;
    T* row_values = values + r * k;
    std::fill(row_ids, row_ids + k, -1);
    std::fill(row_values, row_values + k, T(0));
    int32_t nonfinite = -1;
    for (int64_t id = 0; id < n && nonfinite < 0; ++id)
      if (!std::isfinite(row[id])) nonfinite = int32_t(id);
    first_nonfinite[r] = nonfinite;
    if (nonfinite >= 0) continue;
    int64_t taken = 0;
    if (k == 1) {
      int32_t best = -1;
      for (int32_t id = 0; id < int32_t(n); ++id)
        if (!banned[id] && (best < 0 || row[id] > row[best])) best = id;
      if (best >= 0) row_ids[taken++] = best;
    } else {
      candidates.clear();
      for (int32_t id = 0; id < int32_t(n); ++id)
        if (!banned[id]) candidates.push_back(id);
      taken = std::min<int64_t>(k, int64_t(candidates.size()));
      std::partial_sort(
          candidates.begin(), candidates.begin() + taken, candidates.end(),
          [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      std::copy(candidates.begin(), candidates.begin() + taken, row_ids);
    }
    for (int64_t j = 0; j < taken; ++j) row_values[j] = row[row_ids[j]];
  }
}

template void top_k_rows<float>(int32_t*, float*, int32_t*, const float*, int64_t, int64_t,
                                const uint8_t*, int64_t);
template void top_k_rows<double>(int32_t*, double*, int32_t*, const double*, int64_t, int64_t,
                                 const uint8_t*, int64_t);

}  // namespace sps::ops
