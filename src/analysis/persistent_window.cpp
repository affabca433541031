#include "analysis/persistent_window.h"

#include <algorithm>

#include "model/slot_layout.h"
#include "util/error.h"

namespace sps::analysis {

namespace {

double pooled_mean(const std::vector<double>& per_position, const std::vector<int64_t>& count,
                   int64_t begin, int64_t end) {
  double sum = 0;
  int64_t n = 0;
  for (int64_t p = std::max<int64_t>(begin, 0); p < std::min<int64_t>(end, int64_t(count.size()));
       ++p) {
    sum += per_position[size_t(p)] * double(count[size_t(p)]);
    n += count[size_t(p)];
  }
  return n > 0 ? sum / double(n) : 0.0;
}

}  // namespace

double PersistentWindowResult::mean_delta(int64_t begin, int64_t end) const {
  return pooled_mean(delta, count, begin, end);
}

double PersistentWindowResult::mean_baseline(int64_t begin, int64_t end) const {
  return pooled_mean(baseline_nll, count, begin, end);
}

template <typename T>
PersistentWindowResult measure_persistent_window(Model<T>& baseline, Model<T>& forced,
                                                 const Sequences& seqs, int64_t batch,
                                                 const ProgressCallback& progress) {
  SPS_ASSERT(baseline.config().persistent_key_window < 0 &&
             forced.config().persistent_key_window >= 0 && batch > 0);
  const int64_t L = seqs.length, n = int64_t(seqs.tokens.size());
  PersistentWindowResult r;
  r.length = L;
  r.omega = forced.config().persistent_key_window;
  r.sequences = n;
  r.baseline_nll.assign(size_t(L), 0);
  r.forced_nll.assign(size_t(L), 0);
  r.delta.assign(size_t(L), 0);
  r.count.assign(size_t(L), 0);

  std::vector<int32_t> x(size_t(batch * L)), y(size_t(batch * L));
  std::vector<double> nll_base(size_t(batch * L)), nll_forced(size_t(batch * L));
  SlotLayout layout;  // which terms count, as the model decides it
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t b = std::min(batch, n - first);
    for (int64_t k = 0; k < b; ++k) {
      const auto& seq = seqs.tokens[size_t(first + k)];
      std::copy(seq.begin(), seq.begin() + L, x.begin() + k * L);
      std::copy(seq.begin() + 1, seq.end(), y.begin() + k * L);
    }
    baseline.forward(x.data(), y.data(), b, L, ForwardOptions{.nll = nll_base.data()});
    forced.forward(x.data(), y.data(), b, L, ForwardOptions{.nll = nll_forced.data()});
    build_slot_layout(layout, x.data(), b, L, baseline.config(), baseline.family());
    for (int64_t k = 0; k < b; ++k)
      for (int64_t p = 0; p < L; ++p) {
        const size_t i = size_t(k * L + p);
        if (!layout.keep[i]) continue;
        r.baseline_nll[size_t(p)] += nll_base[i];
        r.forced_nll[size_t(p)] += nll_forced[i];
        r.delta[size_t(p)] += nll_forced[i] - nll_base[i];
        ++r.count[size_t(p)];
      }
    if (progress) progress(first + b, n);
  }
  for (int64_t p = 0; p < L; ++p)
    if (const int64_t c = r.count[size_t(p)]) {
      r.baseline_nll[size_t(p)] /= double(c);
      r.forced_nll[size_t(p)] /= double(c);
      r.delta[size_t(p)] /= double(c);
    }
  return r;
}

template PersistentWindowResult measure_persistent_window<float>(Model<float>&, Model<float>&,
                                                                 const Sequences&, int64_t,
                                                                 const ProgressCallback&);
template PersistentWindowResult measure_persistent_window<double>(Model<double>&, Model<double>&,
                                                                  const Sequences&, int64_t,
                                                                  const ProgressCallback&);

}  // namespace sps::analysis
