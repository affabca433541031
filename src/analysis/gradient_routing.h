#pragma once
// Gradient routing (docs/model.md §9): how much of a source slot's parameter gradient comes from
// future losses. For a target position p and a source slot s of p (standard: slot p;
// interleaved: p's input slot and its predict slot, one stream each),
//   ratio(k) = mean over targets p of ‖G_s(L_{p+k})‖ / ‖G_s(L_p)‖,
// with G_s(L_q) the per-slot parameter gradient of the single loss L_q = NLL at position q
// (slot_gradient_norms.h). One backward of L_q gives G_s(L_q) at every slot s at once, so
// the analysis runs one backward per loss position q, never one per (p, k).
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/documents.h"
#include "model/model.h"
#include "util/progress.h"

namespace sps::analysis {

struct GradientRoutingOptions {
  int64_t target_begin = 64, target_end = 512;  // targets p in [begin, end), cut to the window
  int64_t max_k = 512;                          // k = 1..max_k, cut to what the window holds
  int64_t batch = 4;                            // sequences per backward
};

// ratio(k) of one stream under one choice of terms.
struct RatioCurve {
  std::vector<double> ratio;   // [max_k], ratio(k) at index k − 1 (0 where count is 0)
  std::vector<int64_t> count;  // [max_k] targets averaged: p + k in the window, ‖G_s(L_p)‖ > 0
  double present_norm = 0;     // mean ‖G_s(L_p)‖ over all targets
  int64_t zero_present = 0;    // targets left out because ‖G_s(L_p)‖ = 0
};

struct StreamRouting {
  std::string name;  // standard | input | predict
  bool persistent = false, readout = false;
  RatioCurve all;              // every parameter (docs/model.md §9)
  RatioCurve without_readout;  // without the output norm and LM head terms
};

struct GradientRoutingResult {
  int64_t window = 0, target_begin = 0, target_end = 0, max_k = 0;
  int64_t sequences = 0, targets = 0, backwards = 0;
  std::vector<StreamRouting> streams;
};

// The window is seqs.length tokens (≤ block_size). Targets and max_k are cut to the window:
// target_end ≤ window, max_k ≤ window − 1 − target_begin; target_begin < target_end is the
// caller's to ensure. Progress counts backwards.
template <typename T>
GradientRoutingResult measure_gradient_routing(Model<T>& model, const Sequences& seqs,
                                               const GradientRoutingOptions& options,
                                               const ProgressCallback& progress = {});

}  // namespace sps::analysis
