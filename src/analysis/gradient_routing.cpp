#include "analysis/gradient_routing.h"

#include <algorithm>

#include "analysis/slot_gradient_norms.h"
#include "util/error.h"

namespace sps::analysis {

namespace {

std::vector<StreamRouting> streams_of(const Family& family) {
  if (!family.interleaved) return {StreamRouting{"standard", true, true, {}, {}}};
  std::vector<StreamRouting> out;
  for (Slot slot : {Slot::input, Slot::predict})
    out.push_back(StreamRouting{slot == Slot::input ? "input" : "predict",
                                family.persistent_slot == slot, family.readout_slot == slot, {},
                                {}});
  return out;
}

// Running sums of one ratio curve over the targets of a batch.
class CurveSums {
 public:
  CurveSums(int64_t K, int64_t batch, int64_t targets)
      : K_(K), targets_(targets), ratio_sum_(size_t(K), 0.0), count_(size_t(K), 0),
        present_(size_t(batch * targets), 0.0) {}
  // ‖G_s(L_q)‖ = g at target p (index t) of batch row k; q = p is the present loss, which
  // comes first because q runs upwards.
  void add(int64_t k, int64_t t, int64_t q_minus_p, double g) {
    double& present = present_[size_t(k * targets_ + t)];
    if (q_minus_p == 0) {
      present = g;
      present_sum_ += g;
      if (g == 0) ++zero_present_;
    } else if (present > 0) {
      ratio_sum_[size_t(q_minus_p - 1)] += g / present;
      ++count_[size_t(q_minus_p - 1)];
    }
  }
  RatioCurve curve(int64_t all_targets) const {
    RatioCurve c;
    c.ratio.assign(size_t(K_), 0.0);
    c.count = count_;
    for (size_t k = 0; k < c.ratio.size(); ++k)
      if (count_[k] > 0) c.ratio[k] = ratio_sum_[k] / double(count_[k]);
    c.present_norm = all_targets > 0 ? present_sum_ / double(all_targets) : 0.0;
    c.zero_present = zero_present_;
    return c;
  }

 private:
  int64_t K_, targets_;
  std::vector<double> ratio_sum_;
  std::vector<int64_t> count_;
  std::vector<double> present_;  // [batch, targets] ‖G_s(L_p)‖ of the batch's targets
  double present_sum_ = 0;
  int64_t zero_present_ = 0;
};

}  // namespace

template <typename T>
GradientRoutingResult measure_gradient_routing(Model<T>& model, const Sequences& seqs,
                                               const GradientRoutingOptions& options,
                                               const ProgressCallback& progress) {
  const int64_t W = seqs.length, n = int64_t(seqs.tokens.size());
  GradientRoutingResult r;
  r.window = W;
  r.target_begin = options.target_begin;
  r.target_end = std::min(options.target_end, W);
  SPS_ASSERT(W <= model.config().block_size && options.batch > 0 && r.target_begin >= 0 &&
             r.target_begin < r.target_end);
  r.max_k = std::max<int64_t>(0, std::min(options.max_k, W - 1 - r.target_begin));
  r.sequences = n;
  r.targets = n * (r.target_end - r.target_begin);
  r.streams = streams_of(model.family());
  const int64_t K = r.max_k, streams = int64_t(r.streams.size());
  const int64_t targets = r.target_end - r.target_begin;
  // Loss positions any (p, k) needs: q from the first target up to the last target + K.
  const int64_t q_end = std::min(W, r.target_end + K);
  const int64_t batches = (n + options.batch - 1) / options.batch;
  const int64_t total_backwards = batches * (q_end - r.target_begin);

  // Per stream: every term, and without the readout's.
  std::vector<CurveSums> all(size_t(streams), CurveSums(K, options.batch, targets));
  std::vector<CurveSums> without_readout = all;
  std::vector<int32_t> x(size_t(options.batch * W)), y(size_t(options.batch * W));
  std::vector<double> loss_weight(size_t(options.batch * W), 0.0);
  SlotGradientNorms<T> norms(model, options.batch, W);

  for (int64_t first = 0; first < n; first += options.batch) {
    const int64_t b = std::min(options.batch, n - first);
    for (int64_t k = 0; k < b; ++k) {
      const auto& seq = seqs.tokens[size_t(first + k)];
      std::copy(seq.begin(), seq.begin() + W, x.begin() + k * W);
      std::copy(seq.begin() + 1, seq.end(), y.begin() + k * W);
    }
    // Sequences do not interact, so one backward of Σ_rows L_q gives each row's G_s(L_q).
    for (int64_t q = r.target_begin; q < q_end; ++q) {
      std::fill(loss_weight.begin(), loss_weight.end(), 0.0);
      for (int64_t k = 0; k < b; ++k) loss_weight[size_t(k * W + q)] = 1.0;
      norms.clear();
      model.zero_grads();
      model.forward_backward(
          x.data(), y.data(), b, W, 1.0,
          BackwardOptions<T>{.loss_weight = loss_weight.data(), .observer = &norms});
      // Targets p ≤ q with k = q − p ≤ K.
      const int64_t p_first = std::max(r.target_begin, q - K);
      const int64_t p_last = std::min(r.target_end - 1, q);
      for (int64_t k = 0; k < b; ++k)
        for (int64_t s = 0; s < streams; ++s)
          for (int64_t p = p_first; p <= p_last; ++p) {
            const int64_t slot = norms.slot(k, s, p);
            all[size_t(s)].add(k, p - r.target_begin, q - p, norms.slot_norm(slot));
            without_readout[size_t(s)].add(k, p - r.target_begin, q - p,
                                           norms.slot_norm_without_readout(slot));
          }
      ++r.backwards;
      if (progress) progress(r.backwards, total_backwards);
    }
  }
  for (int64_t s = 0; s < streams; ++s) {
    r.streams[size_t(s)].all = all[size_t(s)].curve(r.targets);
    r.streams[size_t(s)].without_readout = without_readout[size_t(s)].curve(r.targets);
  }
  return r;
}

template GradientRoutingResult measure_gradient_routing<float>(Model<float>&, const Sequences&,
                                                               const GradientRoutingOptions&,
                                                               const ProgressCallback&);
template GradientRoutingResult measure_gradient_routing<double>(Model<double>&, const Sequences&,
                                                                const GradientRoutingOptions&,
                                                                const ProgressCallback&);

}  // namespace sps::analysis
