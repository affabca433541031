#include "analysis/gradient_routing.h"

#include <algorithm>

#include "analysis/slot_gradient_norms.h"
#include "util/error.h"

namespace sps::analysis {

namespace {

std::vector<StreamRouting> streams_of(const Family& family) {
  if (!family.interleaved) return {StreamRouting{"standard", true, true, {}, {}, 0, 0}};
  std::vector<StreamRouting> out;
  for (Slot slot : {Slot::input, Slot::predict})
    out.push_back(StreamRouting{slot == Slot::input ? "input" : "predict",
                                family.persistent_slot == slot, family.readout_slot == slot, {},
                                {}, 0, 0});
  return out;
}

}  // namespace

template <typename T>
GradientRoutingResult measure_gradient_routing(Model<T>& model, const Sequences& seqs,
                                               const GradientRoutingOptions& options,
                                               const Progress& progress) {
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

  std::vector<double> ratio_sum(size_t(streams * K), 0.0);
  std::vector<int64_t> count(size_t(streams * K), 0);
  std::vector<double> present_sum(size_t(streams), 0.0);
  std::vector<int64_t> zero_present(size_t(streams), 0);
  std::vector<int32_t> x(size_t(options.batch * W)), y(size_t(options.batch * W));
  std::vector<double> loss_weight(size_t(options.batch * W), 0.0);
  // ‖G_s(L_p)‖ of the batch's targets, [batch, streams, targets], found when q = p.
  std::vector<double> present(size_t(options.batch * streams * targets), 0.0);
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
      model.forward_backward(x.data(), y.data(), b, W, 1.0,
                             BackwardOptions<T>{loss_weight.data(), &norms});
      // Targets p ≤ q with k = q − p ≤ K.
      const int64_t p_first = std::max(r.target_begin, q - K);
      const int64_t p_last = std::min(r.target_end - 1, q);
      for (int64_t k = 0; k < b; ++k)
        for (int64_t s = 0; s < streams; ++s)
          for (int64_t p = p_first; p <= p_last; ++p) {
            const double g = norms.slot_norm(norms.slot(k, s, p));
            double& g_present = present[size_t((k * streams + s) * targets + p - r.target_begin)];
            if (p == q) {
              g_present = g;
              present_sum[size_t(s)] += g;
              if (g == 0) ++zero_present[size_t(s)];
            } else if (g_present > 0) {
              ratio_sum[size_t(s * K + q - p - 1)] += g / g_present;
              ++count[size_t(s * K + q - p - 1)];
            }
          }
      ++r.backwards;
      if (progress) progress(r.backwards, total_backwards);
    }
  }
  for (int64_t s = 0; s < streams; ++s) {
    StreamRouting& st = r.streams[size_t(s)];
    st.ratio.assign(size_t(K), 0.0);
    st.count.assign(count.begin() + s * K, count.begin() + (s + 1) * K);
    for (int64_t k = 0; k < K; ++k)
      if (st.count[size_t(k)] > 0)
        st.ratio[size_t(k)] = ratio_sum[size_t(s * K + k)] / double(st.count[size_t(k)]);
    st.present_norm = r.targets > 0 ? present_sum[size_t(s)] / double(r.targets) : 0.0;
    st.zero_present = zero_present[size_t(s)];
  }
  return r;
}

template GradientRoutingResult measure_gradient_routing<float>(Model<float>&, const Sequences&,
                                                               const GradientRoutingOptions&,
                                                               const Progress&);
template GradientRoutingResult measure_gradient_routing<double>(Model<double>&, const Sequences&,
                                                                const GradientRoutingOptions&,
                                                                const Progress&);

}  // namespace sps::analysis
