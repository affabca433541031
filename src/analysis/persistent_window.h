#pragma once
// Persistent-window ΔNLL (docs/model.md §9): the same sequences scored by a model as trained and by
// the same weights with the persistent-key window ω forced (docs/model.md §4), position by position:
// Δℓ(p) = mean NLL_forced(p) − NLL_baseline(p).
//
// A query at token p sees persistent keys j with p − j ≤ ω, so for p ≤ ω it sees every key
// it saw before, at every layer: Δℓ(p) is exactly 0 there and can differ only for p > ω.
#include <cstdint>
#include <vector>

#include "analysis/documents.h"
#include "model/model.h"
#include "util/progress.h"

namespace sps::analysis {

struct PersistentWindowResult {
  int64_t length = 0, omega = 0, sequences = 0;
  // Per position p in [0, length): means over the sequences whose term at p counts
  // (x_p ∉ {EOS, PAD}, docs/model.md §5), and how many did.
  std::vector<double> baseline_nll, forced_nll, delta;
  std::vector<int64_t> count;

  // Pooled mean of Δ over the counted terms at positions [begin, end).
  double mean_delta(int64_t begin, int64_t end) const;
  double mean_baseline(int64_t begin, int64_t end) const;
};

// `forced` holds the same weights as `baseline` with config().persistent_key_window = ω ≥ 0;
// `baseline` has ω off. Sequences of seqs.length + 1 tokens, scored `batch` at a time;
// progress counts sequences.
template <typename T>
PersistentWindowResult measure_persistent_window(Model<T>& baseline, Model<T>& forced,
                                                 const Sequences& seqs, int64_t batch,
                                                 const ProgressCallback& progress = {});

}  // namespace sps::analysis
