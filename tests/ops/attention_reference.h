#pragma once
// A naive, dense reference for the family-masked attention: the visibility rules of docs/model.md §4
// written out per (query slot, key slot), a dense softmax in double, and its backward by
// hand. Written independently of ops/cpu/attention.cpp; slow on purpose.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/ops.h"

namespace sps::testing {

// Slot (stream a, token i) of a sequence whose token documents are doc[0..T) may see slot
// (stream b, token j) — docs/model.md §4, one rule per line.
inline bool reference_visible(const ops::AttentionLayout& layout, const int32_t* doc, int64_t a,
                              int64_t i, int64_t b, int64_t j) {
  const bool causal = j < i || (j == i && b <= a);  // input (0) before predict (1)
  const bool same_document = doc == nullptr || doc[j] == doc[i];
  const bool persistent_key = b == layout.persistent_stream;
  const bool in_window = persistent_key || i - j <= layout.window;
  const bool in_persistent_window =
      !persistent_key || layout.persistent_key_window < 0 || i - j <= layout.persistent_key_window;
  return causal && same_document && in_window && in_persistent_window;
}

// A layout for mask checks: B sequences of T tokens, no documents, one head of size 1.
inline ops::AttentionLayout mask_layout(int64_t B, int64_t T, int64_t streams, int64_t persistent,
                                       int64_t window, int64_t omega = -1) {
  ops::AttentionLayout l;
  l.batch = B;
  l.tokens = T;
  l.streams = streams;
  l.persistent_stream = persistent;
  l.window = window;
  l.persistent_key_window = omega;
  l.heads = 1;
  l.head_dim = 1;
  return l;
}

// doc_start[i] = first token of the contiguous run of doc[i].
inline std::vector<int32_t> document_starts(const std::vector<int32_t>& doc, int64_t B, int64_t T) {
  std::vector<int32_t> start(B * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      start[b * T + i] =
          (i > 0 && doc[b * T + i] == doc[b * T + i - 1]) ? start[b * T + i - 1] : int32_t(i);
  return start;
}

// Contiguous document runs: `pads` one-token documents first (left padding), then
// `boundaries` random EOS-like cuts. Ids are arbitrary increasing ints.
inline std::vector<int32_t> random_documents(int64_t B, int64_t T, int pads, int boundaries,
                                             std::mt19937_64& rng) {
  std::vector<int32_t> doc(B * T);
  std::uniform_int_distribution<int64_t> position(1, std::max<int64_t>(1, T - 1));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<char> cut(T + 1, 0);
    for (int p = 1; p <= pads && p < T; ++p) cut[p] = 1;
    for (int k = 0; k < boundaries; ++k) cut[position(rng)] = 1;
    int32_t id = int32_t(7 * b + 3);
    for (int64_t i = 0; i < T; ++i) {
      if (i > 0 && cut[i]) id += 1 + int32_t(rng() % 3);
      doc[b * T + i] = id;
    }
  }
  return doc;
}

// Dense visibility of sequence `batch_index`: mask[query_slot · S + key_slot], slots
// stream-major (slot = stream · T + token).
inline std::vector<char> reference_mask(const ops::AttentionLayout& layout, int64_t batch_index) {
  const int64_t T = layout.tokens, S = layout.streams * T;
  const int32_t* doc = layout.doc ? layout.doc + batch_index * T : nullptr;
  std::vector<char> mask(S * S);
  for (int64_t qs = 0; qs < S; ++qs)
    for (int64_t ks = 0; ks < S; ++ks)
      mask[qs * S + ks] = reference_visible(layout, doc, qs / T, qs % T, ks / T, ks % T);
  return mask;
}

// out [B·S, H·D], lse [B, H, S] from qkv [B·S, 3·H·D].
inline void reference_attention_forward(std::vector<double>& out, std::vector<double>& lse,
                                        const std::vector<double>& qkv,
                                        const ops::AttentionLayout& layout) {
  const int64_t S = layout.streams * layout.tokens, H = layout.heads, D = layout.head_dim;
  const int64_t HD = H * D, ld = 3 * HD;
  const double scale = 1.0 / std::sqrt(double(D));
  out.assign(layout.batch * S * HD, 0.0);
  lse.assign(layout.batch * H * S, 0.0);
  for (int64_t b = 0; b < layout.batch; ++b) {
    const std::vector<char> mask = reference_mask(layout, b);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t qs = 0; qs < S; ++qs) {
        const double* q = &qkv[(b * S + qs) * ld + h * D];
        std::vector<double> score(S, -std::numeric_limits<double>::infinity());
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t ks = 0; ks < S; ++ks) {
          if (!mask[qs * S + ks]) continue;
          const double* k = &qkv[(b * S + ks) * ld + HD + h * D];
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
          score[ks] = dot * scale;
          max_score = std::max(max_score, score[ks]);
        }
        double sum = 0;
        for (int64_t ks = 0; ks < S; ++ks)
          if (mask[qs * S + ks]) sum += std::exp(score[ks] - max_score);
        double* o = &out[(b * S + qs) * HD + h * D];
        for (int64_t ks = 0; ks < S; ++ks) {
          if (!mask[qs * S + ks]) continue;
          const double p = std::exp(score[ks] - max_score) / sum;
          const double* v = &qkv[(b * S + ks) * ld + 2 * HD + h * D];
          for (int64_t d = 0; d < D; ++d) o[d] += p * v[d];
        }
        lse[(b * H + h) * S + qs] = max_score + std::log(sum);
      }
  }
}

// dqkv [B·S, 3·H·D] = ∂(Σ dout ⊙ out)/∂qkv, by the chain rule on the dense softmax:
// dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − Σ_k P·dP), dQ = dS·K·scale, dK = dSᵀ·Q·scale.
inline void reference_attention_backward(std::vector<double>& dqkv, const std::vector<double>& dout,
                                         const std::vector<double>& qkv,
                                         const ops::AttentionLayout& layout) {
  const int64_t S = layout.streams * layout.tokens, H = layout.heads, D = layout.head_dim;
  const int64_t HD = H * D, ld = 3 * HD;
  const double scale = 1.0 / std::sqrt(double(D));
  dqkv.assign(layout.batch * S * ld, 0.0);
  for (int64_t b = 0; b < layout.batch; ++b) {
    const std::vector<char> mask = reference_mask(layout, b);
    auto q = [&](int64_t s) { return &qkv[(b * S + s) * ld + 0 * HD]; };
    auto k = [&](int64_t s) { return &qkv[(b * S + s) * ld + 1 * HD]; };
    auto v = [&](int64_t s) { return &qkv[(b * S + s) * ld + 2 * HD]; };
    for (int64_t h = 0; h < H; ++h)
      for (int64_t qs = 0; qs < S; ++qs) {
        std::vector<double> p(S, 0.0), dp(S, 0.0);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t ks = 0; ks < S; ++ks) {
          if (!mask[qs * S + ks]) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q(qs)[h * D + d] * k(ks)[h * D + d];
          p[ks] = dot * scale;
          max_score = std::max(max_score, p[ks]);
        }
        double sum = 0;
        for (int64_t ks = 0; ks < S; ++ks)
          if (mask[qs * S + ks]) sum += (p[ks] = std::exp(p[ks] - max_score));
        const double* d_o = &dout[(b * S + qs) * HD + h * D];
        double p_dot_dp = 0;
        for (int64_t ks = 0; ks < S; ++ks) {
          if (!mask[qs * S + ks]) continue;
          p[ks] /= sum;
          for (int64_t d = 0; d < D; ++d) dp[ks] += d_o[d] * v(ks)[h * D + d];
          p_dot_dp += p[ks] * dp[ks];
        }
        double* dq = &dqkv[(b * S + qs) * ld + h * D];
        for (int64_t ks = 0; ks < S; ++ks) {
          if (!mask[qs * S + ks]) continue;
          const double ds = p[ks] * (dp[ks] - p_dot_dp);
          double* dk = &dqkv[(b * S + ks) * ld + HD + h * D];
          double* dv = &dqkv[(b * S + ks) * ld + 2 * HD + h * D];
          for (int64_t d = 0; d < D; ++d) {
            dq[d] += ds * k(ks)[h * D + d] * scale;
            dk[d] += ds * q(qs)[h * D + d] * scale;
            dv[d] += p[ks] * d_o[d];
          }
        }
      }
  }
}

}  // namespace sps::testing
