// Greedy choice on the CPU: each row scanned in id order, a later id taking over only when
// strictly larger, so the lowest id wins a tie.
#include "ops/ops.h"

namespace sps::ops {

template <typename T>
void argmax_rows(int32_t* ids, const T* x, int64_t rows, int64_t n, const ExcludedIds& excluded) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    int32_t best = -1;
    for (int32_t id = 0; id < int32_t(n); ++id) {
      bool skip = false;
      for (const int32_t e : excluded.ids) skip = skip || id == e;
      if (!skip && (best < 0 || row[id] > row[best])) best = id;
    }
    ids[r] = best;
  }
}

template void argmax_rows<float>(int32_t*, const float*, int64_t, int64_t, const ExcludedIds&);
template void argmax_rows<double>(int32_t*, const double*, int64_t, int64_t, const ExcludedIds&);

}  // namespace sps::ops
